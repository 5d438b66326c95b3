//===- Screen.h - a uiautomator dump as the indexed list the model reads --===//
//
// `adb shell uiautomator dump` writes the window as XML nodes (text,
// content-desc, class, checkable, checked, clickable, bounds). The agent
// shows the model the interactive ones as an indexed list, in the form
// spark-nano was trained on:
//
//   Screen: Network & internet
//   [0] Wi-Fi (switch, on)
//   [1] Mobile network
//
// A node's kind comes from its class and id: a Switch (or any checkable
// node) is "switch, on|off", an EditText "text, VALUE|empty", a Button
// "button", a tab "tab", a launcher icon "app", a conversation row
// "conversation"; other clickable nodes show their label alone. The title
// is the node with resource-id ending ":id/title", else the package.
//
//===----------------------------------------------------------------------===//
#ifndef PHONE_AGENT_SCREEN_H
#define PHONE_AGENT_SCREEN_H

#include <string>
#include <vector>

namespace agent {

struct Element {
  std::string label;      // what the list shows, kind included
  int x = 0, y = 0;       // the centre of its bounds: where a tap lands
};

struct Screen {
  std::string title;
  std::vector<Element> elements;

  /// "Screen: TITLE" and one "[i] LABEL" line per element.
  std::string render() const;
};

/// Parses a uiautomator dump; false (and `error`) on XML it cannot read.
bool parseScreen(const std::string &xml, Screen &screen, std::string &error);

} // namespace agent

#endif
