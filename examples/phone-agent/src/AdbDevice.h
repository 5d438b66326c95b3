//===- AdbDevice.h - an Android phone over adb ----------------------------===//
//
// `adb shell uiautomator dump` for the screen, `adb shell input` for taps,
// text, swipes and keys; open_app taps the app's icon on the home screen.
// Built, but not run by the tests: this machine has no phone (see the
// example's README).
//
//===----------------------------------------------------------------------===//
#ifndef PHONE_AGENT_ADBDEVICE_H
#define PHONE_AGENT_ADBDEVICE_H

#include "Device.h"

namespace agent {

class AdbDevice : public Device {
public:
  /// serial: the device `adb -s` selects ("" for the only one).
  explicit AdbDevice(std::string serial) : serial(std::move(serial)) {}

  bool dump(std::string &xml, std::string &error) override;
  bool tap(int x, int y, std::string &error) override;
  bool typeText(const std::string &text, std::string &error) override;
  bool swipe(const std::string &direction, std::string &error) override;
  bool pressKey(const std::string &key, std::string &error) override;
  bool openApp(const std::string &name, std::string &error) override;

private:
  /// Runs `adb [-s serial] ARGS`; its output in `out`.
  bool adb(const std::string &args, std::string &out, std::string &error);
  bool screenSize(int &width, int &height, std::string &error);

  std::string serial;
  int width = 0, height = 0;
};

} // namespace agent

#endif
