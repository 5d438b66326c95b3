//===- ToolCalls.cpp - Spark tool calls: streaming parser and grammar -----===//
#include "ToolCalls.h"
#include "Tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace spark::text {

using ojson = nlohmann::ordered_json;

namespace {
const std::string kThinkOpen = "<think>", kThinkClose = "</think>";
const std::string kCallOpen = "<tool_call>", kCallClose = "</tool_call>";
const std::string kKeyOpen = "<arg_key>", kKeyClose = "</arg_key>";
const std::string kValueOpen = "<arg_value>", kValueClose = "</arg_value>";

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && isSpace(s[b]))
    ++b;
  while (e > b && isSpace(s[e - 1]))
    --e;
  return std::string(s.substr(b, e - b));
}

/// Length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partialSuffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == tag.substr(0, n))
      return n;
  return 0;
}

/// An argument value as JSON: a number, true, false or null when the text
/// is exactly one in JSON's own syntax ("06", "0x1F" and "inf" are not:
/// they stay strings), else the string.
ojson argumentValue(const std::string &v) {
  if (v.empty() || !(std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '-' ||
                     v == "true" || v == "false" || v == "null"))
    return ojson(v);
  ojson j = ojson::parse(v, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !(j.is_number() || j.is_boolean() || j.is_null()))
    return ojson(v);
  return j;
}

std::string jsonValueText(const ojson &v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}
} // namespace

std::string ToolCall::argumentsJson() const {
  ojson o = ojson::object();
  for (auto &[k, v] : arguments)
    o[k] = argumentValue(v);
  // Model output may hold invalid UTF-8 (the C API takes any bytes).
  return o.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

ToolCallParser::ToolCallParser(size_t thinkBudget) : thinkBudget(thinkBudget) {}

void ToolCallParser::emit(std::vector<ToolEvent> &events, ToolEvent::Kind kind,
                          std::string text) {
  if (text.empty() && (kind == ToolEvent::Content || kind == ToolEvent::Thinking))
    return;
  // Merge consecutive text of one kind.
  if (!events.empty() && events.back().kind == kind &&
      (kind == ToolEvent::Content || kind == ToolEvent::Thinking)) {
    events.back().text += text;
    return;
  }
  ToolEvent e{kind, std::move(text), {}};
  events.push_back(std::move(e));
}

void ToolCallParser::endCall(std::vector<ToolEvent> &events, bool closed) {
  std::string body = buffer;
  buffer.clear();
  state = State::Content;
  std::vector<std::string> notes;
  if (!closed)
    notes.push_back("<tool_call> was not closed before the end of the output");
  ToolCall call;
  std::string t = trim(body);
  if (!t.empty() && t[0] == '{') {
    try {
      ojson j = ojson::parse(t);
      if (j.contains("name") && j["name"].is_string()) {
        call.name = j["name"].get<std::string>();
        ojson args = j.value("arguments", ojson::object());
        if (args.is_string())
          args = ojson::parse(args.get<std::string>());
        for (auto it = args.begin(); it != args.end(); ++it)
          call.arguments.emplace_back(it.key(), jsonValueText(it.value()));
        notes.push_back("JSON inside <tool_call> instead of <arg_key>/<arg_value> pairs");
      }
    } catch (const std::exception &) {
    }
  } else {
    size_t firstKey = t.find(kKeyOpen);
    call.name = trim(t.substr(0, firstKey));
    size_t pos = firstKey;
    while (pos != std::string::npos && pos < t.size()) {
      size_t kb = pos + kKeyOpen.size();
      size_t ke = t.find(kKeyClose, kb);
      if (ke == std::string::npos) {
        notes.push_back("argument key '" + trim(t.substr(kb)) + "' without </arg_key>: dropped");
        break;
      }
      std::string key = trim(t.substr(kb, ke - kb));
      size_t vb = t.find(kValueOpen, ke);
      size_t nextKey = t.find(kKeyOpen, ke);
      if (vb == std::string::npos || (nextKey != std::string::npos && nextKey < vb)) {
        notes.push_back("argument '" + key + "' without <arg_value>: dropped");
        pos = nextKey;
        continue;
      }
      vb += kValueOpen.size();
      size_t ve = t.find(kValueClose, vb);
      if (ve == std::string::npos || (nextKey != std::string::npos && nextKey < ve)) {
        size_t end = nextKey == std::string::npos ? t.size() : nextKey;
        call.arguments.emplace_back(key, trim(t.substr(vb, end - vb)));
        notes.push_back("argument '" + key + "' without </arg_value>: value taken to the end");
        pos = nextKey;
        continue;
      }
      call.arguments.emplace_back(key, t.substr(vb, ve - vb));
      pos = t.find(kKeyOpen, ve);
    }
  }
  if (call.name.empty() || call.name.find('<') != std::string::npos ||
      call.name.find('\n') != std::string::npos) {
    emit(events, ToolEvent::Recovery, "a <tool_call> without a tool name: kept as text");
    emit(events, ToolEvent::Content, kCallOpen + body + (closed ? kCallClose : ""));
    return;
  }
  for (auto &n : notes)
    emit(events, ToolEvent::Recovery, n);
  ToolEvent e{ToolEvent::Call, "", std::move(call)};
  events.push_back(std::move(e));
}

void ToolCallParser::endJson(std::vector<ToolEvent> &events, bool atEnd) {
  std::string text = buffer;
  buffer.clear();
  state = State::Content;
  std::vector<std::string> notes;
  std::string repaired = text;
  if (atEnd && depth > 0) {
    if (inString)
      repaired += '"';
    repaired.append(size_t(depth), '}');
    notes.push_back("unbalanced braces: " + std::to_string(depth) +
                    " closing brace(s) added at the end of the output");
  }
  ToolCall call;
  try {
    ojson j = ojson::parse(repaired);
    std::string name;
    ojson args;
    auto pick = [&](std::initializer_list<const char *> keys) -> ojson {
      for (const char *k : keys)
        if (j.contains(k))
          return j[k];
      return ojson();
    };
    ojson n = pick({"name", "tool", "function", "action"});
    if (n.is_object() && n.contains("name")) { // {"function": {"name":..., "arguments":...}}
      args = n.value("arguments", ojson::object());
      n = n["name"];
    } else {
      args = pick({"arguments", "parameters", "args", "params"});
    }
    if (n.is_string())
      name = n.get<std::string>();
    if (!bracket.empty() && j.is_object() && (name != bracket || args.is_null())) {
      name = bracket; // "[tap]" then the arguments themselves
      args = j;
    }
    if (args.is_string())
      args = ojson::parse(args.get<std::string>());
    if (args.is_null())
      args = ojson::object();
    if (name.empty() || !args.is_object())
      throw std::runtime_error("not a call");
    call.name = name;
    for (auto it = args.begin(); it != args.end(); ++it)
      call.arguments.emplace_back(it.key(), jsonValueText(it.value()));
  } catch (const std::exception &) {
    std::string back = bracket.empty() ? "" : "[" + bracket + "]\n";
    bracket.clear();
    emit(events, ToolEvent::Content, back + text);
    return;
  }
  notes.insert(notes.begin(), bracket.empty()
                                  ? "a bare JSON object read as a tool call"
                                  : "a bracketed [" + bracket + "] line with JSON read as a tool call");
  bracket.clear();
  for (auto &n : notes)
    emit(events, ToolEvent::Recovery, n);
  ToolEvent e{ToolEvent::Call, "", std::move(call)};
  events.push_back(std::move(e));
}

void ToolCallParser::feed(std::string_view text, std::vector<ToolEvent> &events) {
  buffer.append(text);
  for (;;) {
    if (state == State::Think) {
      size_t close = buffer.find(kThinkClose);
      size_t upto = close == std::string::npos ? buffer.size() - partialSuffix(buffer, kThinkClose)
                                               : close;
      if (thinkBudget && thinkBytes + upto > thinkBudget) {
        size_t room = thinkBudget > thinkBytes ? thinkBudget - thinkBytes : 0;
        emit(events, ToolEvent::Thinking, buffer.substr(0, room));
        buffer.erase(0, room);
        thinkBytes = thinkBudget;
        emit(events, ToolEvent::Recovery,
             "thinking passed its budget of " + std::to_string(thinkBudget) +
                 " bytes without </think>: closed there");
        state = State::Content;
        continue;
      }
      emit(events, ToolEvent::Thinking, buffer.substr(0, upto));
      thinkBytes += upto;
      if (close == std::string::npos) {
        buffer.erase(0, upto);
        return;
      }
      buffer.erase(0, close + kThinkClose.size());
      state = State::Content;
      continue;
    }
    if (state == State::Call) {
      size_t close = buffer.find(kCallClose);
      if (close == std::string::npos)
        return;
      std::string rest = buffer.substr(close + kCallClose.size());
      buffer.resize(close);
      endCall(events, true);
      buffer = rest;
      continue;
    }
    if (state == State::Json) {
      bool closed = false;
      size_t i = jsonScanned;
      for (; i < buffer.size(); ++i) {
        char c = buffer[i];
        if (inString) {
          if (escaped)
            escaped = false;
          else if (c == '\\')
            escaped = true;
          else if (c == '"')
            inString = false;
        } else if (c == '"') {
          inString = true;
        } else if (c == '{') {
          ++depth;
        } else if (c == '}' && --depth == 0) {
          closed = true;
          ++i;
          break;
        }
      }
      jsonScanned = i;
      if (!closed)
        return;
      std::string rest = buffer.substr(i);
      buffer.resize(i);
      endJson(events, false);
      buffer = rest;
      continue;
    }
    // Content: find the first tag, JSON object or bracket line.
    size_t think = buffer.find(kThinkOpen), call = buffer.find(kCallOpen);
    size_t brace = std::string::npos, bracketAt = std::string::npos;
    for (size_t i = 0; i < buffer.size(); ++i) {
      if (buffer[i] == '{') {
        brace = i;
        break;
      }
      if (buffer[i] == '[' && (i == 0 || buffer[i - 1] == '\n') && bracketAt == std::string::npos)
        bracketAt = i;
    }
    size_t first = std::min({think, call, brace, bracketAt});
    if (first == std::string::npos) {
      size_t hold = std::max(partialSuffix(buffer, kThinkOpen), partialSuffix(buffer, kCallOpen));
      if (!bracket.empty()) {
        // A bracket line must be followed by its JSON (after whitespace).
        size_t k = 0;
        while (k < buffer.size() && isSpace(buffer[k]))
          ++k;
        if (k == buffer.size())
          return;
        emit(events, ToolEvent::Content, "[" + bracket + "]\n");
        bracket.clear();
      }
      emit(events, ToolEvent::Content, buffer.substr(0, buffer.size() - hold));
      buffer.erase(0, buffer.size() - hold);
      return;
    }
    if (!bracket.empty() && (first != brace || trim(buffer.substr(0, first)) != "")) {
      emit(events, ToolEvent::Content, "[" + bracket + "]\n");
      bracket.clear();
    }
    if (first == bracketAt) {
      size_t nl = buffer.find('\n', first);
      size_t close = buffer.find(']', first);
      if (close == std::string::npos && nl == std::string::npos && buffer.size() - first < 64) {
        emit(events, ToolEvent::Content, buffer.substr(0, first));
        buffer.erase(0, first);
        return; // wait for the rest of the line
      }
      std::string name = close == std::string::npos ? "" : buffer.substr(first + 1, close - first - 1);
      bool isName = !name.empty() && name.size() < 64 &&
                    std::all_of(name.begin(), name.end(), [](char c) {
                      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                    });
      size_t after = close == std::string::npos ? 0 : close + 1;
      while (isName && after < buffer.size() && (buffer[after] == ' ' || buffer[after] == '\t'))
        ++after;
      bool lineEnds = isName && (after == buffer.size() || buffer[after] == '\n' || buffer[after] == '{');
      if (isName && after == buffer.size()) {
        emit(events, ToolEvent::Content, buffer.substr(0, first));
        buffer.erase(0, first);
        return; // the line may go on
      }
      if (lineEnds) {
        emit(events, ToolEvent::Content, buffer.substr(0, first));
        bracket = name;
        buffer.erase(0, after);
        continue;
      }
      // Not a bracket line: pass the '[' as text.
      emit(events, ToolEvent::Content, buffer.substr(0, first + 1));
      buffer.erase(0, first + 1);
      continue;
    }
    // Whitespace between a bracket line and its JSON belongs to the call.
    if (!(first == brace && !bracket.empty()))
      emit(events, ToolEvent::Content, buffer.substr(0, first));
    if (first == think) {
      buffer.erase(0, first + kThinkOpen.size());
      state = State::Think;
      thinkBytes = 0;
    } else if (first == call) {
      buffer.erase(0, first + kCallOpen.size());
      state = State::Call;
    } else {
      buffer.erase(0, first);
      state = State::Json;
      depth = 0;
      jsonScanned = 0;
      inString = escaped = false;
    }
  }
}

void ToolCallParser::finish(std::vector<ToolEvent> &events) {
  switch (state) {
  case State::Think:
    emit(events, ToolEvent::Thinking, buffer);
    buffer.clear();
    emit(events, ToolEvent::Recovery, "<think> was never closed");
    break;
  case State::Call:
    endCall(events, false);
    break;
  case State::Json:
    endJson(events, true);
    break;
  case State::Content:
    if (!bracket.empty()) {
      emit(events, ToolEvent::Content, "[" + bracket + "]\n");
      bracket.clear();
    }
    emit(events, ToolEvent::Content, buffer);
    buffer.clear();
    break;
  }
  state = State::Content;
}

} // namespace spark::text
