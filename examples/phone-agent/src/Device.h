//===- Device.h - what the agent drives: a phone, real or simulated -------===//
#ifndef PHONE_AGENT_DEVICE_H
#define PHONE_AGENT_DEVICE_H

#include <string>

namespace agent {

/// The device side of the action space (tap takes the coordinates of the
/// element the model named by index; task_complete needs no device). Each
/// call returns false when the device failed (the run stops, `error` says
/// why); an action that did nothing returns true and may leave a note in
/// `error` for the model.
class Device {
public:
  virtual ~Device() = default;
  /// The current window as `uiautomator dump` writes it; false on failure.
  virtual bool dump(std::string &xml, std::string &error) = 0;
  virtual bool tap(int x, int y, std::string &error) = 0;
  virtual bool typeText(const std::string &text, std::string &error) = 0;
  /// direction: up, down, left or right.
  virtual bool swipe(const std::string &direction, std::string &error) = 0;
  /// key: back, home or enter.
  virtual bool pressKey(const std::string &key, std::string &error) = 0;
  virtual bool openApp(const std::string &name, std::string &error) = 0;
};

} // namespace agent

#endif
