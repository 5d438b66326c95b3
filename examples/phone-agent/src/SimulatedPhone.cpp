//===- SimulatedPhone.cpp - the scripted phone ----------------------------===//
#include "SimulatedPhone.h"

#include <algorithm>
#include <cstdio>

namespace agent {

namespace {

constexpr int kRowHeight = 120, kTop = 200, kWidth = 1080;

std::string escape(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    default: out += c;
    }
  }
  return out;
}

/// "7:30 AM" -> (7, 30); false when it is not a time.
bool parseTime(const std::string &text, int &hour, int &minute) {
  int h, m;
  char suffix[3] = {0};
  if (std::sscanf(text.c_str(), "%d:%d %2s", &h, &m, suffix) != 3 || h < 1 || h > 12 ||
      m < 0 || m > 59)
    return false;
  std::string s(suffix);
  if (s != "AM" && s != "PM")
    return false;
  hour = h % 12 + (s == "PM" ? 12 : 0);
  minute = m;
  return true;
}

} // namespace

std::string SimulatedPhone::formatTime(int hour, int minute) {
  char out[16];
  std::snprintf(out, sizeof(out), "%d:%02d %s", (hour + 11) % 12 + 1, minute,
                hour < 12 ? "AM" : "PM");
  return out;
}

std::string SimulatedPhone::title() const {
  const std::string &v = s.screen;
  if (v == "home") return "Home";
  if (v == "settings") return "Settings";
  if (v == "network") return "Network & internet";
  if (v == "devices") return "Connected devices";
  if (v == "display") return "Display";
  if (v == "clock") return "Clock";
  if (v == "alarms") return "Alarms";
  if (v == "new_alarm") return "New alarm";
  if (v == "messages") return "Messages";
  if (v == "chat") return "Chat with " + s.contact;
  return "Camera";
}

std::vector<SimulatedPhone::Node> SimulatedPhone::nodes() const {
  const std::string &v = s.screen;
  std::vector<Node> out;
  auto add = [&](std::string label, std::string kind, bool checked = false,
                 std::string value = "") {
    out.push_back({std::move(label), std::move(kind), std::move(value), checked});
  };
  if (v == "home")
    for (const std::string &app : s.homeApps)
      add(app, "app");
  if (v == "settings")
    for (const char *item : {"Network & internet", "Connected devices", "Display", "Sound",
                             "Battery", "About phone"})
      add(item, "plain");
  if (v == "network") {
    add("Wi-Fi", "switch", s.wifi);
    add("Mobile network", "plain");
    add("Airplane mode", "switch", s.airplane);
    add("Hotspot", "plain");
  }
  if (v == "devices") {
    add("Bluetooth", "switch", s.bluetooth);
    add("Pair new device", "plain");
    add("Printing", "plain");
  }
  if (v == "display") {
    add("Brightness level", "plain");
    add("Dark theme", "switch", s.dark);
    add("Screen timeout", "plain");
  }
  if (v == "clock")
    for (const char *tab : {"Alarm", "Clock", "Timer", "Stopwatch"})
      add(tab, "tab");
  if (v == "alarms") {
    for (const Alarm &a : s.alarms)
      add(formatTime(a.hour, a.minute), "switch", a.on);
    add("Add alarm", "button");
  }
  if (v == "new_alarm") {
    add("Time field", "text", false, s.newAlarm);
    add("Cancel", "button");
    add("Save", "button");
  }
  if (v == "messages") {
    add("Start chat", "button");
    for (const std::string &c : s.chats)
      add(c, "conversation");
  }
  if (v == "chat") {
    add("Message field", "text", false, s.draft);
    add("Send", "button");
  }
  if (v == "camera")
    for (const char *b : {"Shutter", "Switch camera", "Gallery"})
      add(b, "button");
  return out;
}

bool SimulatedPhone::dump(std::string &xml, std::string &error) {
  xml = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>\n<hierarchy rotation=\"0\">\n"
        " <node index=\"0\" text=\"" + escape(title()) +
        "\" resource-id=\"com.spark.sim:id/title\" class=\"android.widget.TextView\" "
        "package=\"com.spark.sim\" content-desc=\"\" checkable=\"false\" checked=\"false\" "
        "clickable=\"false\" bounds=\"[0,80][1080,180]\" />\n";
  std::vector<Node> list = nodes();
  for (size_t i = 0; i < list.size(); ++i) {
    const Node &n = list[i];
    std::string cls = "android.widget.TextView", id, text = n.label, desc;
    if (n.kind == "switch")
      cls = "android.widget.Switch";
    else if (n.kind == "button")
      cls = "android.widget.Button";
    else if (n.kind == "tab")
      cls = "android.widget.TabWidget$Tab";
    else if (n.kind == "text") {
      cls = "android.widget.EditText";
      desc = n.label;
      text = n.value;
    } else if (n.kind == "app")
      id = "com.spark.sim:id/app_icon";
    else if (n.kind == "conversation")
      id = "com.spark.sim:id/conversation";
    int top = kTop + int(i) * kRowHeight;
    xml += " <node index=\"" + std::to_string(i + 1) + "\" text=\"" + escape(text) +
           "\" resource-id=\"" + id + "\" class=\"" + cls +
           "\" package=\"com.spark.sim\" content-desc=\"" + escape(desc) + "\" checkable=\"" +
           (n.kind == "switch" ? "true" : "false") + "\" checked=\"" +
           (n.checked ? "true" : "false") + "\" clickable=\"true\" bounds=\"[0," +
           std::to_string(top) + "][" + std::to_string(kWidth) + "," +
           std::to_string(top + kRowHeight) + "]\" />\n";
  }
  xml += "</hierarchy>\n";
  (void)error;
  return true;
}

void SimulatedPhone::tapNode(const Node &n) {
  const std::string v = s.screen;
  auto go = [&](const std::string &screen) {
    back.push_back(v);
    s.screen = screen;
  };
  if (v == "home") {
    std::string error;
    openApp(n.label, error);
  } else if (v == "settings") {
    if (n.label == "Network & internet") go("network");
    if (n.label == "Connected devices") go("devices");
    if (n.label == "Display") go("display");
  } else if (v == "network") {
    if (n.label == "Wi-Fi") s.wifi = !s.wifi;
    if (n.label == "Airplane mode") s.airplane = !s.airplane;
  } else if (v == "devices") {
    if (n.label == "Bluetooth") s.bluetooth = !s.bluetooth;
  } else if (v == "display") {
    if (n.label == "Dark theme") s.dark = !s.dark;
  } else if (v == "clock") {
    if (n.label == "Alarm") go("alarms");
  } else if (v == "alarms") {
    if (n.label == "Add alarm") {
      s.newAlarm.clear();
      go("new_alarm");
    }
    for (Alarm &a : s.alarms)
      if (formatTime(a.hour, a.minute) == n.label)
        a.on = !a.on;
  } else if (v == "new_alarm") {
    int h, m;
    if (n.label == "Save" && parseTime(s.newAlarm, h, m)) {
      s.alarms.push_back({h, m, true});
      std::sort(s.alarms.begin(), s.alarms.end(), [](const Alarm &a, const Alarm &b) {
        return a.hour * 60 + a.minute < b.hour * 60 + b.minute;
      });
      s.screen = "alarms";
    } else if (n.label == "Cancel") {
      s.screen = "alarms";
    }
  } else if (v == "messages") {
    if (n.kind == "conversation") {
      s.contact = n.label;
      s.draft.clear();
      go("chat");
    }
  } else if (v == "chat") {
    if (n.label == "Send" && !s.draft.empty()) {
      s.sent.emplace_back(s.contact, s.draft);
      s.draft.clear();
    }
  } else if (v == "camera") {
    if (n.label == "Shutter") ++s.photos;
  }
}

bool SimulatedPhone::tap(int x, int y, std::string &error) {
  std::vector<Node> list = nodes();
  int row = (y - kTop) / kRowHeight;
  if (x < 0 || x >= kWidth || y < kTop || row >= int(list.size())) {
    error = "nothing to tap at (" + std::to_string(x) + ", " + std::to_string(y) + ")";
    return true; // a tap on nothing is not a device failure
  }
  tapNode(list[size_t(row)]);
  return true;
}

bool SimulatedPhone::typeText(const std::string &text, std::string &error) {
  if (s.screen == "new_alarm")
    s.newAlarm += text;
  else if (s.screen == "chat")
    s.draft += text;
  (void)error; // typing with no field focused does nothing, as on a phone
  return true;
}

bool SimulatedPhone::swipe(const std::string &direction, std::string &error) {
  (void)direction; // every screen fits
  (void)error;
  return true;
}

bool SimulatedPhone::pressKey(const std::string &key, std::string &error) {
  if (key == "home") {
    back.clear();
    s.screen = "home";
  } else if (key == "back") {
    if (back.empty()) {
      s.screen = "home";
    } else {
      s.screen = back.back();
      back.pop_back();
    }
  }
  (void)error;
  return true;
}

bool SimulatedPhone::openApp(const std::string &name, std::string &error) {
  static const char *kApps[][2] = {{"Settings", "settings"}, {"Clock", "clock"},
                                   {"Messages", "messages"}, {"Camera", "camera"}};
  for (const auto &app : kApps)
    if (name == app[0]) {
      back.clear();
      back.push_back("home");
      s.screen = app[1];
      return true;
    }
  error = "no app named '" + name + "' opens here";
  return true; // the screen does not change; the agent says so
}

} // namespace agent
