//===- AdbDevice.cpp - an Android phone over adb --------------------------===//
#include "AdbDevice.h"

#include "Screen.h"

#include <cstdio>
#include <sys/wait.h>

namespace agent {

namespace {

/// A single-quoted shell word.
std::string quote(const std::string &s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

} // namespace

bool AdbDevice::adb(const std::string &args, std::string &out, std::string &error) {
  std::string command = "adb " + (serial.empty() ? "" : "-s " + quote(serial) + " ") + args +
                        " 2>&1";
  FILE *pipe = popen(command.c_str(), "r");
  if (!pipe) {
    error = "cannot run adb";
    return false;
  }
  out.clear();
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    error = "adb " + args + " failed: " + out;
    return false;
  }
  return true;
}

bool AdbDevice::dump(std::string &xml, std::string &error) {
  std::string out;
  if (!adb("shell uiautomator dump /sdcard/window_dump.xml", out, error))
    return false;
  return adb("exec-out cat /sdcard/window_dump.xml", xml, error);
}

bool AdbDevice::tap(int x, int y, std::string &error) {
  std::string out;
  return adb("shell input tap " + std::to_string(x) + " " + std::to_string(y), out, error);
}

bool AdbDevice::typeText(const std::string &text, std::string &error) {
  // `input text` takes %s for a space; the shell on the phone sees one word.
  std::string word;
  for (char c : text)
    word += c == ' ' ? std::string("%s") : std::string(1, c);
  std::string out;
  return adb("shell input text " + quote(quote(word)), out, error);
}

bool AdbDevice::screenSize(int &w, int &h, std::string &error) {
  if (!width) {
    std::string out;
    if (!adb("shell wm size", out, error))
      return false;
    size_t at = out.rfind(':');
    if (at == std::string::npos ||
        std::sscanf(out.c_str() + at + 1, " %dx%d", &width, &height) != 2) {
      error = "adb shell wm size: unexpected answer " + out;
      return false;
    }
  }
  w = width;
  h = height;
  return true;
}

bool AdbDevice::swipe(const std::string &direction, std::string &error) {
  int w, h;
  if (!screenSize(w, h, error))
    return false;
  int x0 = w / 2, y0 = h / 2, x1 = x0, y1 = y0;
  if (direction == "up")
    y0 = h * 3 / 4, y1 = h / 4; // the content moves up: the finger goes up
  else if (direction == "down")
    y0 = h / 4, y1 = h * 3 / 4;
  else if (direction == "left")
    x0 = w * 3 / 4, x1 = w / 4;
  else if (direction == "right")
    x0 = w / 4, x1 = w * 3 / 4;
  else {
    error = "swipe: direction '" + direction + "' is not up, down, left or right";
    return true;
  }
  std::string out;
  return adb("shell input swipe " + std::to_string(x0) + " " + std::to_string(y0) + " " +
                 std::to_string(x1) + " " + std::to_string(y1) + " 300",
             out, error);
}

bool AdbDevice::pressKey(const std::string &key, std::string &error) {
  const char *code = key == "back"   ? "KEYCODE_BACK"
                     : key == "home" ? "KEYCODE_HOME"
                     : key == "enter" ? "KEYCODE_ENTER"
                                      : nullptr;
  if (!code) {
    error = "press_key: key '" + key + "' is not back, home or enter";
    return true;
  }
  std::string out;
  return adb(std::string("shell input keyevent ") + code, out, error);
}

bool AdbDevice::openApp(const std::string &name, std::string &error) {
  if (!pressKey("home", error))
    return false;
  std::string xml;
  if (!dump(xml, error))
    return false;
  Screen screen;
  if (!parseScreen(xml, screen, error))
    return false;
  for (const Element &e : screen.elements)
    if (e.label == name || e.label == name + " (app)")
      return tap(e.x, e.y, error);
  error = "open_app: no '" + name + "' icon on the home screen";
  return true;
}

} // namespace agent
