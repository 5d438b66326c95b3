//===- Screen.cpp - uiautomator XML to the model's element list -----------===//
#include "Screen.h"

#include <expat.h>

#include <cstdio>
#include <cstring>
#include <map>

namespace agent {

namespace {

bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

struct Parse {
  Screen *screen = nullptr;
  std::string package;
  bool haveTitle = false;
};

void startElement(void *user, const char *name, const char **attributes) {
  Parse &p = *static_cast<Parse *>(user);
  if (std::strcmp(name, "node") != 0)
    return;
  std::map<std::string, std::string> a;
  for (int i = 0; attributes[i]; i += 2)
    a[attributes[i]] = attributes[i + 1];
  if (p.package.empty())
    p.package = a["package"];
  const std::string &id = a["resource-id"], &cls = a["class"];
  std::string label = !a["content-desc"].empty() ? a["content-desc"] : a["text"];
  if (endsWith(id, ":id/title")) {
    if (!p.haveTitle)
      p.screen->title = a["text"];
    p.haveTitle = true;
    return;
  }
  bool checkable = a["checkable"] == "true";
  bool clickable = a["clickable"] == "true";
  if (!clickable && !checkable)
    return;
  std::string kind;
  if (cls.find("Switch") != std::string::npos || checkable)
    kind = std::string("switch, ") + (a["checked"] == "true" ? "on" : "off");
  else if (cls.find("EditText") != std::string::npos)
    kind = "text, " + (a["text"].empty() ? std::string("empty") : a["text"]);
  else if (cls.find("Button") != std::string::npos)
    kind = "button";
  else if (cls.find("Tab") != std::string::npos)
    kind = "tab";
  else if (endsWith(id, ":id/app_icon"))
    kind = "app";
  else if (endsWith(id, ":id/conversation"))
    kind = "conversation";
  if (label.empty())
    return; // nothing the model could name
  Element e;
  e.label = kind.empty() ? label : label + " (" + kind + ")";
  int x0, y0, x1, y1;
  if (std::sscanf(a["bounds"].c_str(), "[%d,%d][%d,%d]", &x0, &y0, &x1, &y1) == 4) {
    e.x = (x0 + x1) / 2;
    e.y = (y0 + y1) / 2;
  }
  p.screen->elements.push_back(e);
}

void endElement(void *, const char *) {}

} // namespace

std::string Screen::render() const {
  std::string out = "Screen: " + title;
  for (size_t i = 0; i < elements.size(); ++i)
    out += "\n[" + std::to_string(i) + "] " + elements[i].label;
  return out;
}

bool parseScreen(const std::string &xml, Screen &screen, std::string &error) {
  screen = Screen();
  Parse p;
  p.screen = &screen;
  XML_Parser parser = XML_ParserCreate("UTF-8");
  if (!parser) {
    error = "out of memory";
    return false;
  }
  XML_SetUserData(parser, &p);
  XML_SetElementHandler(parser, startElement, endElement);
  bool ok = XML_Parse(parser, xml.data(), static_cast<int>(xml.size()), 1) != XML_STATUS_ERROR;
  if (!ok)
    error = std::string("screen dump: ") + XML_ErrorString(XML_GetErrorCode(parser)) +
            " at line " + std::to_string(XML_GetCurrentLineNumber(parser));
  XML_ParserFree(parser);
  if (ok && !p.haveTitle)
    screen.title = p.package;
  return ok;
}

} // namespace agent
