//===- ToolGrammar.cpp - logits masks for Spark tool calls ----------------===//
//
// A byte-level automaton of the call format (ToolCalls.h) and, per token,
// the bytes it decodes to. mask() asks the automaton which first bytes may
// come next and checks only the tokens that start with one of them; in free
// text (thinking, string values) every ordinary token without '<' is
// allowed at once from a precomputed list, and only tokens holding '<' are
// simulated.
//
//===----------------------------------------------------------------------===//
#include "ToolCalls.h"
#include "Tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace spark::text {

using ojson = nlohmann::ordered_json;

std::vector<ToolSpec> parseToolSpecs(std::string_view json, const std::string &name) {
  ojson j;
  try {
    j = ojson::parse(json.begin(), json.end());
  } catch (const ojson::parse_error &e) {
    throw TextError(name + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
  }
  if (!j.is_array())
    throw TextError(name + ": expected a JSON list of tools");
  std::vector<ToolSpec> tools;
  for (size_t i = 0; i < j.size(); ++i) {
    std::string where = name + ": [" + std::to_string(i) + "]";
    const ojson &t = j[i];
    const ojson &f = t.contains("function") ? t["function"] : t;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string())
      throw TextError(where + ": expected {\"type\": \"function\", \"function\": {\"name\": ...}}"
                              " or {\"name\": ...}");
    ToolSpec spec;
    spec.name = f["name"].get<std::string>();
    if (spec.name.empty() || spec.name.find_first_of("<> \n\t") != std::string::npos)
      throw TextError(where + ".name: '" + spec.name + "' is not a usable tool name");
    if (f.contains("description") && f["description"].is_string())
      spec.description = f["description"].get<std::string>();
    ojson params = f.value("parameters", ojson::object());
    ojson props = params.value("properties", ojson::object());
    if (!props.is_object())
      throw TextError(where + ".parameters.properties: expected an object");
    std::vector<std::string> required;
    if (params.contains("required") && params["required"].is_array())
      for (auto &r : params["required"])
        if (r.is_string())
          required.push_back(r.get<std::string>());
    for (auto it = props.begin(); it != props.end(); ++it) {
      ToolParam p;
      p.name = it.key();
      std::string pw = where + ".parameters.properties." + p.name;
      if (p.name.empty() || p.name.find('<') != std::string::npos)
        throw TextError(pw + ": not a usable argument name");
      std::string type = it.value().value("type", "string");
      if (type == "integer")
        p.type = ToolParam::Integer;
      else if (type == "number")
        p.type = ToolParam::Number;
      else if (type == "boolean")
        p.type = ToolParam::Boolean;
      else
        p.type = ToolParam::String; // arrays and objects are written as text
      if (it.value().contains("enum") && it.value()["enum"].is_array())
        for (auto &e : it.value()["enum"]) {
          std::string v = e.is_string() ? e.get<std::string>() : e.dump();
          if (v.empty() || v.find('<') != std::string::npos)
            throw TextError(pw + ".enum: '" + v + "' cannot be written as a value");
          p.enumValues.push_back(v);
        }
      p.required = std::find(required.begin(), required.end(), p.name) != required.end();
      spec.params.push_back(std::move(p));
    }
    if (spec.params.size() > 64)
      throw TextError(where + ": more than 64 parameters");
    tools.push_back(std::move(spec));
  }
  if (tools.empty())
    throw TextError(name + ": the list of tools is empty");
  return tools;
}

std::string toolSpecsJson(std::string_view json, const std::string &name) {
  parseToolSpecs(json, name); // validates
  return ojson::parse(json.begin(), json.end()).dump();
}

namespace {

enum class Phase : uint8_t {
  Start,      // partial of <think> or <tool_call>
  Think,      // free text; closeMatch counts a partial </think>
  AfterThink, // whitespace, then <tool_call>
  Name,       // partial tool name
  Between,    // partial <arg_key> or </tool_call> (after a name or value)
  Key,        // partial argument name
  KeyClose,   // partial </arg_key><arg_value>
  Value,      // value text
  ValueClose, // partial </arg_value>
  End,        // only an end token
  Done,
};

struct State {
  Phase phase = Phase::Start;
  uint8_t closeMatch = 0; // bytes of </think> matched in Think
  int16_t tool = -1, param = -1;
  uint64_t used = 0;      // parameters already given
  uint32_t thinkBytes = 0;
  uint32_t valueBytes = 0; // of a string value
  std::string partial;    // name, key, value or literal so far
};

} // namespace

class ToolGrammarImpl {
public:
  const Tokenizer &tok;
  std::vector<ToolSpec> tools;
  std::vector<int32_t> endTokens;
  bool allowThinking;
  size_t thinkBudget;
  uint32_t maxValueBytes;
  State state;

  std::vector<std::string> bytes;        // per token
  std::vector<uint8_t> special;          // added special tokens
  std::vector<int32_t> byFirst[256];     // ordinary tokens by first byte
  std::vector<int32_t> freeTokens;       // ordinary tokens without '<',
  std::vector<size_t> freeLength;        //   shortest first, and their bytes
  std::vector<int32_t> ltOrSpecial;      // the rest (minus end tokens)
  std::vector<uint8_t> freeFlags;        // 1 for each free token
  struct TrieNode {
    uint32_t childBegin = 0, childEnd = 0, tokBegin = 0, tokEnd = 0;
    unsigned char byte = 0;
  };
  std::vector<TrieNode> trie;
  std::vector<int32_t> trieTokens;
  std::vector<int32_t> specialTokens;
  mutable std::vector<uint8_t> scratch;  // mask()'s allowed flags

  ToolGrammarImpl(const Tokenizer &t, std::vector<ToolSpec> tl, std::vector<int32_t> ends,
                  bool thinking, size_t budget, uint32_t maxValue)
      : tok(t), tools(std::move(tl)), endTokens(std::move(ends)), allowThinking(thinking),
        thinkBudget(budget), maxValueBytes(maxValue) {
    int32_t n = tok.vocabSize();
    bytes.resize(n);
    special.resize(n);
    for (int32_t id = 0; id < n; ++id) {
      special[id] = tok.isSpecial(id);
      if (isEnd(id))
        continue;
      if (tok.tokenString(id).empty())
        continue; // an unused id
      bytes[id] = tok.decodeBytes(&id, 1, false);
      const std::string &b = bytes[id];
      if (b.empty())
        continue;
      if (!special[id])
        byFirst[static_cast<unsigned char>(b[0])].push_back(id);
      if (special[id] || b.find('<') != std::string::npos)
        ltOrSpecial.push_back(id);
      else
        freeTokens.push_back(id);
    }
    std::stable_sort(freeTokens.begin(), freeTokens.end(),
                     [&](int32_t a, int32_t b) { return bytes[a].size() < bytes[b].size(); });
    buildTrie();
    for (int32_t id : ltOrSpecial)
      if (special[id])
        specialTokens.push_back(id);
    freeFlags.assign(size_t(n), 0);
    for (int32_t id : freeTokens) {
      freeLength.push_back(bytes[id].size());
      freeFlags[id] = 1;
    }
  }

  template <typename Allow> void walk(uint32_t node, const State &s, Allow &allow) const {
    const TrieNode &n = trie[node];
    if (node != 0)
      for (uint32_t k = n.tokBegin; k < n.tokEnd; ++k)
        allow(trieTokens[k]);
    for (uint32_t c = n.childBegin; c < n.childEnd; ++c) {
      State next = s;
      if (step(next, trie[c].byte, false))
        walk(c, next, allow);
    }
  }

  /// A byte trie of the ordinary tokens' bytes; children are contiguous.
  void buildTrie() {
    std::vector<int32_t> ids;
    for (int c = 0; c < 256; ++c)
      ids.insert(ids.end(), byFirst[c].begin(), byFirst[c].end());
    std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return bytes[a] < bytes[b]; });
    trie.assign(1, TrieNode());
    struct Job {
      uint32_t node;
      size_t lo, hi, depth;
    };
    std::vector<Job> stack{{0, 0, ids.size(), 0}};
    while (!stack.empty()) {
      Job j = stack.back();
      stack.pop_back();
      size_t k = j.lo;
      trie[j.node].tokBegin = uint32_t(trieTokens.size());
      while (k < j.hi && bytes[ids[k]].size() == j.depth)
        trieTokens.push_back(ids[k++]);
      trie[j.node].tokEnd = uint32_t(trieTokens.size());
      trie[j.node].childBegin = uint32_t(trie.size());
      while (k < j.hi) {
        unsigned char b = static_cast<unsigned char>(bytes[ids[k]][j.depth]);
        size_t e = k;
        while (e < j.hi && static_cast<unsigned char>(bytes[ids[e]][j.depth]) == b)
          ++e;
        TrieNode child;
        child.byte = b;
        trie.push_back(child);
        stack.push_back({uint32_t(trie.size() - 1), k, e, j.depth + 1});
        k = e;
      }
      trie[j.node].childEnd = uint32_t(trie.size());
    }
  }

  bool isEnd(int32_t id) const {
    return std::find(endTokens.begin(), endTokens.end(), id) != endTokens.end();
  }

  const ToolParam *param(const State &s) const {
    return s.tool >= 0 && s.param >= 0 ? &tools[s.tool].params[s.param] : nullptr;
  }

  bool requiredDone(const State &s) const {
    const auto &ps = tools[s.tool].params;
    for (size_t i = 0; i < ps.size(); ++i)
      if (ps[i].required && !(s.used >> i & 1))
        return false;
    return true;
  }
  bool keysLeft(const State &s) const {
    return s.used != (tools[s.tool].params.size() >= 64
                          ? ~uint64_t(0)
                          : (uint64_t(1) << tools[s.tool].params.size()) - 1);
  }

  /// Advances `s` over byte c; false if the grammar forbids it. `strict`
  /// (special tokens) forbids bytes taken as free text.
  bool step(State &s, unsigned char c, bool strict) const {
    auto literal = [&](std::initializer_list<const std::string *> options, auto onComplete) {
      std::string next = s.partial + char(c);
      for (const std::string *o : options) {
        if (o->compare(0, next.size(), next) != 0)
          continue;
        if (next.size() == o->size()) {
          s.partial.clear();
          onComplete(*o);
        } else {
          s.partial = std::move(next);
        }
        return true;
      }
      return false;
    };
    static const std::string think = "<think>", call = "<tool_call>", close = "</think>",
                             keyOpen = "<arg_key>", callClose = "</tool_call>",
                             keyClose = "</arg_key><arg_value>", valueClose = "</arg_value>";
    switch (s.phase) {
    case Phase::Start:
      if (allowThinking)
        return literal({&think, &call}, [&](const std::string &o) {
          s.phase = o == think ? Phase::Think : Phase::Name;
        });
      return literal({&call}, [&](const std::string &) { s.phase = Phase::Name; });
    case Phase::Think: {
      bool forced = thinkBudget && s.thinkBytes >= thinkBudget;
      if (c == static_cast<unsigned char>(close[s.closeMatch])) {
        if (++s.closeMatch == close.size()) {
          s.phase = Phase::AfterThink;
          s.closeMatch = 0;
        }
        return true;
      }
      if (forced || strict)
        return false;
      s.thinkBytes += 1 + s.closeMatch;
      s.closeMatch = c == '<' ? 1 : 0;
      return true;
    }
    case Phase::AfterThink:
      if (s.partial.empty() && (c == ' ' || c == '\n'))
        return !strict;
      return literal({&call}, [&](const std::string &) { s.phase = Phase::Name; });
    case Phase::Name: {
      if (c == '<') {
        for (size_t t = 0; t < tools.size(); ++t)
          if (tools[t].name == s.partial) {
            s.tool = int16_t(t);
            s.partial = "<";
            s.phase = Phase::Between;
            return true;
          }
        return false;
      }
      std::string next = s.partial + char(c);
      for (auto &t : tools)
        if (t.name.compare(0, next.size(), next) == 0) {
          s.partial = std::move(next);
          return true;
        }
      return false;
    }
    case Phase::Between: {
      bool keys = keysLeft(s), closeOk = requiredDone(s);
      std::string next = s.partial + char(c);
      if (keys && keyOpen.compare(0, next.size(), next) == 0) {
        s.partial = next.size() == keyOpen.size() ? "" : next;
        if (s.partial.empty())
          s.phase = Phase::Key;
        return true;
      }
      if (closeOk && callClose.compare(0, next.size(), next) == 0) {
        s.partial = next.size() == callClose.size() ? "" : next;
        if (s.partial.empty())
          s.phase = Phase::End;
        return true;
      }
      return false;
    }
    case Phase::Key: {
      const auto &ps = tools[s.tool].params;
      if (c == '<') {
        for (size_t i = 0; i < ps.size(); ++i)
          if (!(s.used >> i & 1) && ps[i].name == s.partial) {
            s.param = int16_t(i);
            s.used |= uint64_t(1) << i;
            s.partial = "<";
            s.phase = Phase::KeyClose;
            return true;
          }
        return false;
      }
      std::string next = s.partial + char(c);
      for (size_t i = 0; i < ps.size(); ++i)
        if (!(s.used >> i & 1) && ps[i].name.compare(0, next.size(), next) == 0) {
          s.partial = std::move(next);
          return true;
        }
      return false;
    }
    case Phase::KeyClose:
      return literal({&keyClose}, [&](const std::string &) { s.phase = Phase::Value; });
    case Phase::Value: {
      const ToolParam &p = *param(s);
      if (c == '<') {
        bool complete;
        if (!p.enumValues.empty())
          complete = std::find(p.enumValues.begin(), p.enumValues.end(), s.partial) !=
                     p.enumValues.end();
        else if (p.type == ToolParam::Boolean)
          complete = s.partial == "true" || s.partial == "false";
        else if (p.type == ToolParam::Integer || p.type == ToolParam::Number)
          complete = !s.partial.empty() && s.partial != "-" && s.partial.back() != '.';
        else
          complete = true;
        if (!complete)
          return false;
        s.partial = "<";
        s.valueBytes = 0;
        s.phase = Phase::ValueClose;
        return true;
      }
      std::string next = s.partial + char(c);
      if (!p.enumValues.empty() || p.type == ToolParam::Boolean) {
        static const std::vector<std::string> booleans{"true", "false"};
        const auto &options = p.enumValues.empty() ? booleans : p.enumValues;
        for (auto &o : options)
          if (o.compare(0, next.size(), next) == 0) {
            s.partial = std::move(next);
            return true;
          }
        return false;
      }
      if (p.type == ToolParam::Integer || p.type == ToolParam::Number) {
        if (c == '-')
          return s.partial.empty() ? (s.partial = next, true) : false;
        if (c == '.') {
          if (p.type != ToolParam::Number || s.partial.empty() || s.partial == "-" ||
              s.partial.find('.') != std::string::npos)
            return false;
          s.partial = next;
          return true;
        }
        if (c < '0' || c > '9' || s.partial.size() >= 32)
          return false;
        s.partial = next;
        return true;
      }
      if (strict || s.valueBytes >= maxValueBytes)
        return false;
      ++s.valueBytes; // the text itself is not needed
      return true;
    }
    case Phase::ValueClose:
      return literal({&valueClose}, [&](const std::string &) {
        s.phase = Phase::Between;
        s.param = -1;
      });
    case Phase::End:
    case Phase::Done:
      return false;
    }
    return false;
  }

  bool simulate(const State &from, int32_t id, State *out) const {
    if (isEnd(id)) {
      if (from.phase != Phase::End)
        return false;
      if (out) {
        *out = from;
        out->phase = Phase::Done;
      }
      return true;
    }
    if (id < 0 || size_t(id) >= bytes.size() || bytes[id].empty())
      return false;
    State s = from;
    for (unsigned char c : bytes[id])
      if (!step(s, c, special[id]))
        return false;
    if (out)
      *out = std::move(s);
    return true;
  }

  /// In free text (thinking, string values) every ordinary token without
  /// '<' that fits the remaining budget is allowed without simulation:
  /// returns that budget in bytes (SIZE_MAX: unlimited), or 0 outside free
  /// text. Sound: each byte of such a token adds at most one byte (plus the
  /// partial "</think>" it breaks), so none is refused.
  size_t freeRoom(const State &s) const {
    if (s.phase == Phase::Think) {
      if (!thinkBudget)
        return SIZE_MAX;
      size_t used = size_t(s.thinkBytes) + s.closeMatch;
      return used < thinkBudget ? thinkBudget - used : 0;
    }
    if (s.phase == Phase::Value) {
      const ToolParam &p = *param(s);
      if (!p.enumValues.empty() || p.type != ToolParam::String)
        return 0;
      return s.valueBytes < maxValueBytes ? maxValueBytes - s.valueBytes : 0;
    }
    return 0;
  }

  size_t mask(float *logits, int32_t vocab) const {
    std::vector<uint8_t> &allowed = scratch;
    size_t count = 0;
    auto allow = [&](int32_t id) {
      if (id < vocab && !allowed[id]) {
        allowed[id] = 1;
        ++count;
      }
    };
    bool freeText = state.phase == Phase::Think ||
                    (state.phase == Phase::Value && param(state)->enumValues.empty() &&
                     param(state)->type == ToolParam::String);
    if (freeText && state.phase != Phase::Done) {
      // Start from every free token, then drop those too long for the room.
      allowed.assign(freeFlags.begin(), freeFlags.end());
      allowed.resize(size_t(vocab), 0);
      count = freeTokens.size();
      size_t room = freeRoom(state);
      for (size_t i = freeTokens.size(); i > 0 && freeLength[i - 1] > room; --i)
        if (freeTokens[i - 1] < vocab) {
          allowed[freeTokens[i - 1]] = 0;
          --count;
        }
      for (int32_t id : ltOrSpecial)
        if (simulate(state, id, nullptr))
          allow(id);
      // Tokens that go on with a partial "</think>" cost no budget.
      if (state.phase == Phase::Think && state.closeMatch > 0)
        for (int32_t id : byFirst[static_cast<unsigned char>("</think>"[state.closeMatch])])
          if (!allowed[id] && simulate(state, id, nullptr))
            allow(id);
    } else {
      allowed.assign(size_t(vocab), 0);
    }
    if (state.phase == Phase::End) {
      for (int32_t id : endTokens)
        allow(id);
    } else if (state.phase != Phase::Done && !freeText) {
      // Walk the token trie along the bytes the grammar accepts: the work
      // is the number of valid token prefixes, not the vocabulary.
      walk(0, state, allow);
      for (int32_t id : specialTokens)
        if (simulate(state, id, nullptr))
          allow(id);
    }
    const uint8_t *a = allowed.data();
    for (int32_t id = 0; id < vocab; ++id) // branch-free: vectorizes
      logits[id] = a[id] ? logits[id] : -INFINITY;
    return count;
  }
};

ToolGrammar::ToolGrammar(const Tokenizer &tokenizer, std::vector<ToolSpec> tools,
                         std::vector<int32_t> endTokens, bool allowThinking,
                         size_t thinkBudget, size_t maxValueBytes)
    : impl(std::make_unique<ToolGrammarImpl>(tokenizer, std::move(tools), std::move(endTokens),
                                             allowThinking, thinkBudget,
                                             uint32_t(std::min<size_t>(maxValueBytes, 1u << 30)))) {}
ToolGrammar::~ToolGrammar() = default;

size_t ToolGrammar::mask(float *logits, int32_t vocabSize) const {
  return impl->mask(logits, vocabSize);
}
bool ToolGrammar::allows(int32_t token) const {
  return impl->simulate(impl->state, token, nullptr);
}
bool ToolGrammar::accept(int32_t token) {
  State next;
  if (!impl->simulate(impl->state, token, &next))
    return false;
  impl->state = std::move(next);
  return true;
}
bool ToolGrammar::done() const { return impl->state.phase == Phase::Done; }
void ToolGrammar::reset() { impl->state = State(); }

} // namespace spark::text
