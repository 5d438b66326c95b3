//===- SimulatedPhone.h - a scripted phone that answers like a real one ---===//
//
// The screens of the phone spark-nano was trained on (tools/train/
// nano_data.py): a launcher; Settings -> Network & internet (Wi-Fi,
// Airplane mode switches), Connected devices (Bluetooth), Display (Dark
// theme); Clock -> Alarm tab -> alarms with switches, Add alarm -> time
// field, Save; Messages -> conversations -> message field, Send; Camera ->
// Shutter. It emits the XML `uiautomator dump` would and changes state on
// the actions, so the agent cannot tell it from a device.
//
//===----------------------------------------------------------------------===//
#ifndef PHONE_AGENT_SIMULATEDPHONE_H
#define PHONE_AGENT_SIMULATEDPHONE_H

#include "Device.h"

#include <string>
#include <vector>

namespace agent {

struct Alarm {
  int hour, minute;
  bool on;
};

struct PhoneState {
  bool wifi = false, airplane = false, bluetooth = false, dark = false;
  std::vector<Alarm> alarms;
  std::vector<std::string> homeApps, chats;
  std::string screen = "home"; // home, settings, network, devices, display,
                               // clock, alarms, new_alarm, messages, chat, camera
  std::string draft, contact, newAlarm;
  std::vector<std::pair<std::string, std::string>> sent; // (contact, text)
  int photos = 0;
};

class SimulatedPhone : public Device {
public:
  explicit SimulatedPhone(PhoneState state) : s(std::move(state)) {}
  const PhoneState &state() const { return s; }

  bool dump(std::string &xml, std::string &error) override;
  bool tap(int x, int y, std::string &error) override;
  bool typeText(const std::string &text, std::string &error) override;
  bool swipe(const std::string &direction, std::string &error) override;
  bool pressKey(const std::string &key, std::string &error) override;
  bool openApp(const std::string &name, std::string &error) override;

  /// "7:30 AM" as the screens write it.
  static std::string formatTime(int hour, int minute);

private:
  struct Node {
    std::string label, kind, value; // kind: app, plain, switch, tab, button, text, conversation
    bool checked = false;
  };
  std::vector<Node> nodes() const;
  std::string title() const;
  void tapNode(const Node &node);

  PhoneState s;
  std::vector<std::string> back; // screens to return to
};

} // namespace agent

#endif
