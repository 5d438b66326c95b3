//===- Tokenizer.cpp - Hugging Face tokenizer.json ------------------------===//
#include "Tokenizer.h"
#include "Regex.h"

#include <nlohmann/json.hpp>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <queue>
#include <sstream>
#include <sys/stat.h>
#include <unordered_map>

namespace spark::text {

using json = nlohmann::json;

namespace {

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Error context: "tokenizer.json: pre_tokenizer.pretokenizers[0].pattern".
struct Where {
  std::string file;
  std::string field;
  Where sub(const std::string &name) const {
    return {file, field.empty() ? name : field + "." + name};
  }
  Where at(size_t i) const { return {file, field + "[" + std::to_string(i) + "]"}; }
  [[noreturn]] void fail(const std::string &what) const {
    throw TextError(file + ": " + (field.empty() ? "" : field + ": ") + what);
  }
  std::string str() const { return file + ": " + field; }
};

const json &member(const json &obj, const char *name, const Where &w) {
  if (!obj.is_object())
    w.fail("expected an object");
  auto it = obj.find(name);
  if (it == obj.end())
    w.sub(name).fail("missing");
  return *it;
}

std::string stringMember(const json &obj, const char *name, const Where &w) {
  const json &v = member(obj, name, w);
  if (!v.is_string())
    w.sub(name).fail("expected a string");
  return v.get<std::string>();
}

std::string optString(const json &obj, const char *name, const Where &w,
                      const std::string &def = "") {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null())
    return def;
  if (!it->is_string())
    w.sub(name).fail("expected a string or null");
  return it->get<std::string>();
}

bool optBool(const json &obj, const char *name, const Where &w, bool def) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null())
    return def;
  if (!it->is_boolean())
    w.sub(name).fail("expected true or false");
  return it->get<bool>();
}

size_t optCount(const json &obj, const char *name, const Where &w, size_t def) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null())
    return def;
  if (!it->is_number_unsigned())
    w.sub(name).fail("expected a non-negative integer");
  return it->get<size_t>();
}

void replaceAll(std::string &s, const std::string &from, const std::string &to) {
  if (from.empty())
    return;
  std::string out;
  size_t pos = 0;
  for (;;) {
    size_t hit = s.find(from, pos);
    if (hit == std::string::npos)
      break;
    out.append(s, pos, hit - pos);
    out.append(to);
    pos = hit + from.size();
  }
  if (pos == 0)
    return;
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

void appendUtf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// Byte length of the (valid) UTF-8 character starting with byte c.
size_t charLen(unsigned char c) {
  return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

uint32_t decodeChar(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  switch (charLen(b(0))) {
  case 1:
    return b(0);
  case 2:
    return ((b(0) & 0x1F) << 6) | (b(1) & 0x3F);
  case 3:
    return ((b(0) & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  default:
    return ((b(0) & 0x07) << 18) | ((b(1) & 0x3F) << 12) |
           ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
  }
}

bool isAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

/// GPT-2's byte-to-character table: printable bytes map to themselves, the
/// rest to U+0100 onwards.
struct ByteLevelTable {
  std::string byteToChar[256];
  std::unordered_map<uint32_t, uint8_t> charToByte;
  ByteLevelTable() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      uint32_t cp = printable ? b : next++;
      appendUtf8(byteToChar[b], cp);
      charToByte[cp] = static_cast<uint8_t>(b);
    }
  }
};
const ByteLevelTable &byteLevel() {
  static const ByteLevelTable table;
  return table;
}

const char *kGpt2Pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| "
                           "?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/// A "pattern" field: {"String": s} (a literal) or {"Regex": r}.
struct Pattern {
  std::string literal;
  std::unique_ptr<Regex> regex;

  Pattern(const json &j, const Where &w) {
    if (!j.is_object() || j.size() != 1)
      w.fail("expected {\"String\": ...} or {\"Regex\": ...}");
    if (j.contains("String") && j["String"].is_string()) {
      literal = j["String"].get<std::string>();
      if (literal.empty())
        w.sub("String").fail("an empty pattern matches nothing");
    } else if (j.contains("Regex") && j["Regex"].is_string()) {
      regex = std::make_unique<Regex>(j["Regex"].get<std::string>(),
                                      w.sub("Regex").str());
    } else {
      w.fail("expected {\"String\": ...} or {\"Regex\": ...}");
    }
  }

  std::vector<std::pair<size_t, size_t>> findAll(std::string_view s) const {
    if (regex)
      return regex->findAll(s);
    std::vector<std::pair<size_t, size_t>> out;
    size_t pos = 0;
    while ((pos = s.find(literal, pos)) != std::string_view::npos) {
      out.emplace_back(pos, pos + literal.size());
      pos += literal.size();
    }
    return out;
  }
};

//===----------------------------------------------------------------------===//
// Normalizers
//===----------------------------------------------------------------------===//

struct Normalizer {
  virtual ~Normalizer() = default;
  virtual void apply(std::string &s) const = 0;
};

struct IcuNormalizer : Normalizer {
  const UNormalizer2 *norm = nullptr;
  IcuNormalizer(const std::string &form, const Where &w) {
    UErrorCode status = U_ZERO_ERROR;
    if (form == "NFC")
      norm = unorm2_getNFCInstance(&status);
    else if (form == "NFD")
      norm = unorm2_getNFDInstance(&status);
    else if (form == "NFKC")
      norm = unorm2_getNFKCInstance(&status);
    else
      norm = unorm2_getNFKDInstance(&status);
    if (U_FAILURE(status) || !norm)
      w.fail("ICU has no " + form + " data: " + u_errorName(status));
  }
  void apply(std::string &s) const override {
    if (std::all_of(s.begin(), s.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x80; }))
      return; // ASCII is invariant under every normalization form.
    UErrorCode status = U_ZERO_ERROR;
    std::u16string in(s.size(), u'\0');
    int32_t len = 0;
    u_strFromUTF8(reinterpret_cast<UChar *>(in.data()),
                  static_cast<int32_t>(in.size()), &len, s.data(),
                  static_cast<int32_t>(s.size()), &status);
    if (U_FAILURE(status))
      return; // unreachable for repaired input; leave the text as it is
    in.resize(len);
    std::u16string out(in.size() * 3 + 16, u'\0');
    int32_t outLen = unorm2_normalize(
        norm, reinterpret_cast<const UChar *>(in.data()), len,
        reinterpret_cast<UChar *>(out.data()),
        static_cast<int32_t>(out.size()), &status);
    if (U_FAILURE(status))
      return;
    std::string utf8(static_cast<size_t>(outLen) * 3 + 4, '\0');
    int32_t utf8Len = 0;
    status = U_ZERO_ERROR;
    u_strToUTF8(utf8.data(), static_cast<int32_t>(utf8.size()), &utf8Len,
                reinterpret_cast<const UChar *>(out.data()), outLen, &status);
    if (U_FAILURE(status))
      return;
    utf8.resize(utf8Len);
    s.swap(utf8);
  }
};

struct ReplaceNormalizer : Normalizer {
  std::unique_ptr<Pattern> pattern;
  std::string content;
  ReplaceNormalizer(const json &j, const Where &w) {
    pattern = std::make_unique<Pattern>(member(j, "pattern", w), w.sub("pattern"));
    content = stringMember(j, "content", w);
  }
  void apply(std::string &s) const override {
    if (!pattern->regex) {
      replaceAll(s, pattern->literal, content);
      return;
    }
    auto matches = pattern->findAll(s);
    if (matches.empty())
      return;
    std::string out;
    size_t pos = 0;
    for (auto [b, e] : matches) {
      out.append(s, pos, b - pos);
      out.append(content);
      pos = e;
    }
    out.append(s, pos, std::string::npos);
    s.swap(out);
  }
};

struct PrependNormalizer : Normalizer {
  std::string prefix;
  void apply(std::string &s) const override {
    if (!s.empty())
      s.insert(0, prefix);
  }
};

struct StripNormalizer : Normalizer {
  bool left = true, right = true;
  void apply(std::string &s) const override {
    // Unicode White_Space, as Rust's str::trim.
    auto isSpaceAt = [&](size_t i, size_t *len) {
      uint32_t c = decodeChar(s, i);
      *len = charLen(static_cast<unsigned char>(s[i]));
      return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 ||
             c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
             c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
    };
    size_t b = 0, e = s.size(), len;
    if (left)
      while (b < e && isSpaceAt(b, &len))
        b += len;
    if (right)
      while (e > b) {
        size_t k = e - 1;
        while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80)
          --k;
        if (!isSpaceAt(k, &len))
          break;
        e = k;
      }
    s = s.substr(b, e - b);
  }
};

struct SequenceNormalizer : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> parts;
  void apply(std::string &s) const override {
    for (auto &p : parts)
      p->apply(s);
  }
};

std::unique_ptr<Normalizer> parseNormalizer(const json &j, const Where &w) {
  if (j.is_null())
    return nullptr;
  std::string type = stringMember(j, "type", w);
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<IcuNormalizer>(type, w);
  if (type == "Replace")
    return std::make_unique<ReplaceNormalizer>(j, w);
  if (type == "Prepend") {
    auto n = std::make_unique<PrependNormalizer>();
    n->prefix = stringMember(j, "prepend", w);
    return n;
  }
  if (type == "Strip") {
    auto n = std::make_unique<StripNormalizer>();
    n->left = optBool(j, "strip_left", w, true);
    n->right = optBool(j, "strip_right", w, true);
    return n;
  }
  if (type == "Sequence") {
    auto n = std::make_unique<SequenceNormalizer>();
    const json &list = member(j, "normalizers", w);
    if (!list.is_array())
      w.sub("normalizers").fail("expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      if (auto p = parseNormalizer(list[i], w.sub("normalizers").at(i)))
        n->parts.push_back(std::move(p));
    return n;
  }
  w.sub("type").fail("normalizer type '" + type +
                     "' is not supported (supported: NFC, NFD, NFKC, NFKD, "
                     "Replace, Prepend, Strip, Sequence)");
}

//===----------------------------------------------------------------------===//
// Pre-tokenizers: each turns a list of pieces into a finer list.
//===----------------------------------------------------------------------===//

using Pieces = std::vector<std::string>;

struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  /// `first` is true for the piece that starts the input text.
  virtual void apply(Pieces &pieces, bool startsInput) const = 0;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

/// Splits `s` at `matches` ([b,e) ranges, ascending) the way the tokenizers
/// library's SplitDelimiterBehavior does; empty pieces are dropped.
void splitAt(std::string_view s, std::vector<std::pair<size_t, size_t>> matches,
             SplitBehavior behavior, bool invert, Pieces &out) {
  // (begin, end, isMatch) segments covering s.
  struct Seg { size_t b, e; bool match; };
  std::vector<Seg> segs;
  size_t pos = 0;
  for (auto [b, e] : matches) {
    if (b > pos)
      segs.push_back({pos, b, invert});
    if (e > b)
      segs.push_back({b, e, !invert});
    pos = e;
  }
  if (pos < s.size())
    segs.push_back({pos, s.size(), invert});

  auto emit = [&](size_t b, size_t e) {
    if (e > b)
      out.emplace_back(s.substr(b, e - b));
  };
  switch (behavior) {
  case SplitBehavior::Removed:
    for (auto &g : segs)
      if (!g.match)
        emit(g.b, g.e);
    break;
  case SplitBehavior::Isolated:
    for (auto &g : segs)
      emit(g.b, g.e);
    break;
  case SplitBehavior::Contiguous: {
    size_t i = 0;
    while (i < segs.size()) {
      size_t j = i + 1;
      while (j < segs.size() && segs[j].match == segs[i].match)
        ++j;
      emit(segs[i].b, segs[j - 1].e);
      i = j;
    }
    break;
  }
  case SplitBehavior::MergedWithPrevious: {
    size_t start = 0;
    bool open = false;
    for (auto &g : segs) {
      if (!open) {
        start = g.b;
        open = true;
      }
      if (g.match) {
        emit(start, g.e);
        open = false;
      }
    }
    if (open)
      emit(start, s.size());
    break;
  }
  case SplitBehavior::MergedWithNext: {
    size_t start = 0;
    bool open = false;
    for (auto &g : segs) {
      if (g.match) {
        if (open)
          emit(start, g.b);
        start = g.b;
        open = true;
      } else if (!open) {
        start = g.b;
        open = true;
      }
    }
    if (open)
      emit(start, s.size());
    break;
  }
  }
}

SplitBehavior parseBehavior(const json &j, const Where &w) {
  std::string b = stringMember(j, "behavior", w);
  if (b == "Removed")
    return SplitBehavior::Removed;
  if (b == "Isolated")
    return SplitBehavior::Isolated;
  if (b == "MergedWithPrevious")
    return SplitBehavior::MergedWithPrevious;
  if (b == "MergedWithNext")
    return SplitBehavior::MergedWithNext;
  if (b == "Contiguous")
    return SplitBehavior::Contiguous;
  w.sub("behavior").fail("unknown split behavior '" + b + "'");
}

struct SplitPre : PreTokenizer {
  std::unique_ptr<Pattern> pattern;
  SplitBehavior behavior;
  bool invert;
  SplitPre(const json &j, const Where &w) {
    pattern = std::make_unique<Pattern>(member(j, "pattern", w), w.sub("pattern"));
    behavior = parseBehavior(j, w);
    invert = optBool(j, "invert", w, false);
  }
  void apply(Pieces &pieces, bool) const override {
    Pieces out;
    for (auto &p : pieces)
      splitAt(p, pattern->findAll(p), behavior, invert, out);
    pieces.swap(out);
  }
};

struct ByteLevelPre : PreTokenizer {
  bool addPrefixSpace;
  std::unique_ptr<Regex> regex;
  ByteLevelPre(const json &j, const Where &w) {
    addPrefixSpace = optBool(j, "add_prefix_space", w, true);
    if (optBool(j, "use_regex", w, true))
      regex = std::make_unique<Regex>(kGpt2Pattern, w.str());
  }
  void apply(Pieces &pieces, bool) const override {
    Pieces split;
    for (auto &p : pieces) {
      std::string s = p;
      if (addPrefixSpace && (s.empty() || s[0] != ' '))
        s.insert(0, " ");
      if (regex)
        splitAt(s, regex->findAll(s), SplitBehavior::Isolated, false, split);
      else if (!s.empty())
        split.push_back(std::move(s));
    }
    const auto &table = byteLevel();
    for (auto &p : split) {
      std::string mapped;
      mapped.reserve(p.size() * 2);
      for (unsigned char c : p)
        mapped += table.byteToChar[c];
      p.swap(mapped);
    }
    pieces.swap(split);
  }
};

struct MetaspacePre : PreTokenizer {
  std::string replacement = "\xE2\x96\x81";
  std::string scheme = "always";
  bool split = true;
  MetaspacePre(const json &j, const Where &w) {
    replacement = optString(j, "replacement", w, replacement);
    if (j.contains("prepend_scheme"))
      scheme = optString(j, "prepend_scheme", w, scheme);
    else if (j.contains("add_prefix_space"))
      scheme = optBool(j, "add_prefix_space", w, true) ? "always" : "never";
    if (scheme != "always" && scheme != "first" && scheme != "never")
      w.sub("prepend_scheme").fail("expected always, first or never");
    split = optBool(j, "split", w, true);
  }
  void apply(Pieces &pieces, bool startsInput) const override {
    Pieces out;
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string s = pieces[i];
      replaceAll(s, " ", replacement);
      bool prepend = scheme == "always" || (scheme == "first" && i == 0 && startsInput);
      if (prepend && s.compare(0, replacement.size(), replacement) != 0)
        s.insert(0, replacement);
      if (!split) {
        if (!s.empty())
          out.push_back(std::move(s));
        continue;
      }
      std::vector<std::pair<size_t, size_t>> m;
      size_t pos = 0;
      while ((pos = s.find(replacement, pos)) != std::string::npos) {
        m.emplace_back(pos, pos + replacement.size());
        pos += replacement.size();
      }
      splitAt(s, m, SplitBehavior::MergedWithNext, false, out);
    }
    pieces.swap(out);
  }
};

struct DigitsPre : PreTokenizer {
  std::unique_ptr<Regex> regex;
  bool individual;
  DigitsPre(const json &j, const Where &w) {
    individual = optBool(j, "individual_digits", w, false);
    regex = std::make_unique<Regex>(individual ? "\\p{Nd}" : "\\p{Nd}+", w.str());
  }
  void apply(Pieces &pieces, bool) const override {
    Pieces out;
    for (auto &p : pieces)
      splitAt(p, regex->findAll(p),
              individual ? SplitBehavior::Isolated : SplitBehavior::Contiguous,
              false, out);
    pieces.swap(out);
  }
};

struct RegexPre : PreTokenizer {
  std::unique_ptr<Regex> regex;
  SplitBehavior behavior;
  bool invert;
  RegexPre(const char *pattern, SplitBehavior b, bool inv, const Where &w)
      : regex(std::make_unique<Regex>(pattern, w.str())), behavior(b), invert(inv) {}
  void apply(Pieces &pieces, bool) const override {
    Pieces out;
    for (auto &p : pieces)
      splitAt(p, regex->findAll(p), behavior, invert, out);
    pieces.swap(out);
  }
};

struct SequencePre : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  void apply(Pieces &pieces, bool startsInput) const override {
    for (auto &p : parts)
      p->apply(pieces, startsInput);
  }
};

std::unique_ptr<PreTokenizer> parsePreTokenizer(const json &j, const Where &w) {
  if (j.is_null())
    return nullptr;
  std::string type = stringMember(j, "type", w);
  if (type == "Split")
    return std::make_unique<SplitPre>(j, w);
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelPre>(j, w);
  if (type == "Metaspace")
    return std::make_unique<MetaspacePre>(j, w);
  if (type == "Digits")
    return std::make_unique<DigitsPre>(j, w);
  if (type == "Whitespace")
    return std::make_unique<RegexPre>("\\w+|[^\\w\\s]+", SplitBehavior::Removed,
                                      true, w);
  if (type == "WhitespaceSplit")
    return std::make_unique<RegexPre>("\\s+", SplitBehavior::Removed, false, w);
  if (type == "Sequence") {
    auto s = std::make_unique<SequencePre>();
    const json &list = member(j, "pretokenizers", w);
    if (!list.is_array())
      w.sub("pretokenizers").fail("expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      if (auto p = parsePreTokenizer(list[i], w.sub("pretokenizers").at(i)))
        s->parts.push_back(std::move(p));
    return s;
  }
  w.sub("type").fail("pre-tokenizer type '" + type +
                     "' is not supported (supported: Split, ByteLevel, "
                     "Metaspace, Digits, Whitespace, WhitespaceSplit, Sequence)");
}

//===----------------------------------------------------------------------===//
// Decoders: each maps a list of token strings to a list of byte strings.
//===----------------------------------------------------------------------===//

struct Decoder {
  virtual ~Decoder() = default;
  virtual void apply(std::vector<std::string> &tokens) const = 0;
};

struct ByteLevelDecoder : Decoder {
  void apply(std::vector<std::string> &tokens) const override {
    const auto &table = byteLevel();
    std::string bytes;
    for (auto &t : tokens) {
      std::string mapped;
      bool ok = true;
      for (size_t i = 0; i < t.size(); i += charLen(t[i])) {
        auto it = table.charToByte.find(decodeChar(t, i));
        if (it == table.charToByte.end()) {
          ok = false;
          break;
        }
        mapped += static_cast<char>(it->second);
      }
      bytes += ok ? mapped : t;
    }
    tokens.assign(1, std::move(bytes));
  }
};

struct ReplaceDecoder : Decoder {
  std::unique_ptr<Pattern> pattern;
  std::string content;
  ReplaceDecoder(const json &j, const Where &w) {
    pattern = std::make_unique<Pattern>(member(j, "pattern", w), w.sub("pattern"));
    if (pattern->regex)
      w.sub("pattern").fail("a Replace decoder takes a String pattern");
    content = stringMember(j, "content", w);
  }
  void apply(std::vector<std::string> &tokens) const override {
    for (auto &t : tokens)
      replaceAll(t, pattern->literal, content);
  }
};

/// "<0xAB>" -> 0xAB, or -1.
int byteToken(const std::string &t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>')
    return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

struct ByteFallbackDecoder : Decoder {
  // Bytes stay raw here; invalid sequences become U+FFFD when the whole
  // text is repaired (decode) or held back (streaming).
  void apply(std::vector<std::string> &tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    bool inBytes = false;
    for (auto &t : tokens) {
      int b = byteToken(t);
      if (b >= 0) {
        bytes += static_cast<char>(b);
        inBytes = true;
        continue;
      }
      if (inBytes) {
        out.push_back(std::move(bytes));
        bytes.clear();
        inBytes = false;
      }
      out.push_back(t);
    }
    if (inBytes)
      out.push_back(std::move(bytes));
    tokens.swap(out);
  }
};

struct FuseDecoder : Decoder {
  void apply(std::vector<std::string> &tokens) const override {
    std::string all;
    for (auto &t : tokens)
      all += t;
    tokens.assign(1, std::move(all));
  }
};

struct StripDecoder : Decoder {
  std::string content;
  size_t start, stop;
  void apply(std::vector<std::string> &tokens) const override {
    for (auto &t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t i = 0; i < start && t.compare(b, content.size(), content) == 0; ++i)
        b += content.size();
      for (size_t i = 0; i < stop && e >= b + content.size() &&
                         t.compare(e - content.size(), content.size(), content) == 0;
           ++i)
        e -= content.size();
      t = t.substr(b, e - b);
    }
  }
};

struct MetaspaceDecoder : Decoder {
  std::string replacement = "\xE2\x96\x81";
  bool stripFirst = true;
  void apply(std::vector<std::string> &tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      replaceAll(tokens[i], replacement, " ");
      if (i == 0 && stripFirst && !tokens[i].empty() && tokens[i][0] == ' ')
        tokens[i].erase(0, 1);
    }
  }
};

struct SequenceDecoder : Decoder {
  std::vector<std::unique_ptr<Decoder>> parts;
  void apply(std::vector<std::string> &tokens) const override {
    for (auto &p : parts)
      p->apply(tokens);
  }
};

std::unique_ptr<Decoder> parseDecoder(const json &j, const Where &w) {
  if (j.is_null())
    return nullptr;
  std::string type = stringMember(j, "type", w);
  if (type == "ByteLevel")
    return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace")
    return std::make_unique<ReplaceDecoder>(j, w);
  if (type == "ByteFallback")
    return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse")
    return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    auto d = std::make_unique<StripDecoder>();
    d->content = stringMember(j, "content", w);
    d->start = optCount(j, "start", w, 0);
    d->stop = optCount(j, "stop", w, 0);
    return d;
  }
  if (type == "Metaspace") {
    auto d = std::make_unique<MetaspaceDecoder>();
    d->replacement = optString(j, "replacement", w, d->replacement);
    std::string scheme = optString(j, "prepend_scheme", w, "always");
    d->stripFirst = scheme != "never" && optBool(j, "add_prefix_space", w, true);
    return d;
  }
  if (type == "Sequence") {
    auto s = std::make_unique<SequenceDecoder>();
    const json &list = member(j, "decoders", w);
    if (!list.is_array())
      w.sub("decoders").fail("expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      if (auto d = parseDecoder(list[i], w.sub("decoders").at(i)))
        s->parts.push_back(std::move(d));
    return s;
  }
  w.sub("type").fail("decoder type '" + type +
                     "' is not supported (supported: ByteLevel, Replace, "
                     "ByteFallback, Fuse, Strip, Metaspace, Sequence)");
}

//===----------------------------------------------------------------------===//
// Post-processors (only what add_special needs: ids around the sequence).
//===----------------------------------------------------------------------===//

struct PostProcessor {
  std::vector<int32_t> before, after;
};

void parsePostProcessor(const json &j, const Where &w,
                        const std::unordered_map<std::string, int32_t> &ids,
                        PostProcessor &pp) {
  if (j.is_null())
    return;
  std::string type = stringMember(j, "type", w);
  if (type == "ByteLevel")
    return; // offsets only
  if (type == "Sequence") {
    const json &list = member(j, "processors", w);
    if (!list.is_array())
      w.sub("processors").fail("expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parsePostProcessor(list[i], w.sub("processors").at(i), ids, pp);
    return;
  }
  if (type == "TemplateProcessing") {
    const json &single = member(j, "single", w);
    const json &special = member(j, "special_tokens", w);
    if (!single.is_array())
      w.sub("single").fail("expected an array");
    bool seenSequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      Where wi = w.sub("single").at(i);
      const json &item = single[i];
      if (item.contains("Sequence")) {
        seenSequence = true;
        continue;
      }
      if (!item.contains("SpecialToken"))
        wi.fail("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      std::string name = stringMember(item["SpecialToken"], "id", wi.sub("SpecialToken"));
      auto it = special.find(name);
      if (it == special.end())
        wi.fail("special token '" + name + "' is not in special_tokens");
      const json &list = member(*it, "ids", w.sub("special_tokens").sub(name));
      for (auto &id : list) {
        if (!id.is_number_integer())
          w.sub("special_tokens").sub(name).sub("ids").fail("expected integers");
        (seenSequence ? pp.after : pp.before).push_back(id.get<int32_t>());
      }
    }
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto token = [&](const char *name) {
      const json &v = member(j, name, w);
      if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer())
        w.sub(name).fail("expected [token, id]");
      return v[1].get<int32_t>();
    };
    pp.before.push_back(token("cls"));
    pp.after.push_back(token("sep"));
    return;
  }
  w.sub("type").fail("post-processor type '" + type +
                     "' is not supported (supported: TemplateProcessing, "
                     "ByteLevel, BertProcessing, RobertaProcessing, Sequence)");
}

//===----------------------------------------------------------------------===//
// Added tokens: a byte trie for leftmost-longest matching.
//===----------------------------------------------------------------------===//

struct AddedToken {
  std::string content;
  int32_t id;
  bool special, lstrip, rstrip, singleWord, normalized;
};

class AddedTrie {
public:
  void add(const std::string &s, int32_t token) {
    int32_t node = 0;
    for (unsigned char c : s) {
      auto key = (static_cast<uint64_t>(node) << 8) | c;
      auto it = edges.find(key);
      if (it == edges.end()) {
        terminal.push_back(-1);
        int32_t next = static_cast<int32_t>(terminal.size() - 1);
        edges.emplace(key, next);
        node = next;
      } else {
        node = it->second;
      }
    }
    terminal[node] = token;
    firstByte[static_cast<unsigned char>(s[0])] = true;
  }
  bool empty() const { return terminal.size() == 1; }
  /// Longest token starting at s[i]: its index and length, or -1.
  int32_t longestAt(std::string_view s, size_t i, size_t *len) const {
    if (!firstByte[static_cast<unsigned char>(s[i])])
      return -1;
    int32_t node = 0, best = -1;
    for (size_t k = i; k < s.size(); ++k) {
      auto it = edges.find((static_cast<uint64_t>(node) << 8) |
                           static_cast<unsigned char>(s[k]));
      if (it == edges.end())
        break;
      node = it->second;
      if (terminal[node] >= 0) {
        best = terminal[node];
        *len = k + 1 - i;
      }
    }
    return best;
  }

private:
  std::unordered_map<uint64_t, int32_t> edges;
  std::vector<int32_t> terminal{-1};
  bool firstByte[256] = {};
};

struct PairHash {
  size_t operator()(uint64_t v) const { return std::hash<uint64_t>()(v * 0x9E3779B97F4A7C15ull); }
};

} // namespace

//===----------------------------------------------------------------------===//
// Reading: model.vocab and model.merges (most of a tokenizer.json's bytes)
// go straight into vectors; the rest becomes a DOM.
//===----------------------------------------------------------------------===//

struct MergeItem {
  std::string a, b;
  bool line = false; // "a b" in `a`
  bool bad = false;
};

struct BigParts {
  bool haveVocab = false, haveMerges = false;
  std::vector<std::pair<std::string, int64_t>> vocab;
  std::string badVocabToken;
  bool badVocab = false;
  std::vector<MergeItem> merges;
};

class TokenizerSax {
public:
  TokenizerSax(json &root, BigParts &big) : dom(root, true), big(big) {}

  bool null() { return capture ? scalar(false) : dom.null(); }
  bool boolean(bool v) { return capture ? scalar(false) : dom.boolean(v); }
  bool number_integer(json::number_integer_t v) {
    return capture ? integer(v) : dom.number_integer(v);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return capture ? integer(v > uint64_t(INT64_MAX) ? -1 : int64_t(v))
                   : dom.number_unsigned(v);
  }
  bool number_float(json::number_float_t v, const std::string &s) {
    return capture ? scalar(false) : dom.number_float(v, s);
  }
  bool string(std::string &v) {
    if (!capture)
      return dom.string(v);
    if (capture == Merges && nested == 0) {
      MergeItem m;
      m.a = std::move(v);
      m.line = true;
      big.merges.push_back(std::move(m));
    } else if (capture == Merges && nested == 1) {
      (inner++ == 0 ? current.a : current.b) = std::move(v);
    } else {
      scalar(false);
    }
    return true;
  }
  bool binary(json::binary_t &v) { return capture ? scalar(false) : dom.binary(v); }
  bool start_object(std::size_t n) {
    if (capture)
      return enter(false);
    if (stack.size() == 2 && stack[0] == "model" && stack[1] == "vocab") {
      capture = Vocab;
      big.haveVocab = true;
      return true;
    }
    stack.push_back("");
    return dom.start_object(n);
  }
  bool key(std::string &k) {
    if (capture) {
      pendingKey = k;
      return true;
    }
    stack.back() = k;
    return dom.key(k);
  }
  bool end_object() {
    if (capture)
      return leave();
    stack.pop_back();
    return dom.end_object();
  }
  bool start_array(std::size_t n) {
    if (capture)
      return enter(true);
    if (stack.size() == 2 && stack[0] == "model" && stack[1] == "merges") {
      capture = Merges;
      big.haveMerges = true;
      return true;
    }
    stack.push_back("");
    return dom.start_array(n);
  }
  bool end_array() {
    if (capture)
      return leave();
    stack.pop_back();
    return dom.end_array();
  }
  bool parse_error(std::size_t pos, const std::string &token,
                   const nlohmann::detail::exception &e) {
    errorByte = pos; // the DOM parser rethrows a sliced copy without it
    return dom.parse_error(pos, token, e);
  }
  size_t errorByte = 0;

private:
  enum Capture { None, Vocab, Merges };
  nlohmann::detail::json_sax_dom_parser<json> dom;
  BigParts &big;
  std::vector<std::string> stack; // the current key of each open container
  Capture capture = None;
  int nested = 0, inner = 0;
  std::string pendingKey;
  MergeItem current;

  bool integer(int64_t v) {
    if (capture == Vocab && nested == 0) {
      big.vocab.emplace_back(std::move(pendingKey), v);
      return true;
    }
    return scalar(false);
  }
  bool scalar(bool) {
    if (capture == Vocab && nested == 0 && !big.badVocab) {
      big.badVocab = true;
      big.badVocabToken = pendingKey;
    }
    if (capture == Merges && nested == 1)
      current.bad = true;
    if (capture == Merges && nested == 0) {
      MergeItem m;
      m.bad = true;
      big.merges.push_back(m);
    }
    return true;
  }
  bool enter(bool array) {
    if (capture == Merges && nested == 0 && array) {
      current = MergeItem();
      inner = 0;
    } else {
      scalar(false);
    }
    ++nested;
    return true;
  }
  bool leave() {
    if (nested == 0) { // the captured member ends: a placeholder in the DOM
      capture = None;
      return dom.null();
    }
    if (--nested == 0 && capture == Merges) {
      if (inner != 2)
        current.bad = true;
      big.merges.push_back(std::move(current));
    }
    return true;
  }
};

//===----------------------------------------------------------------------===//
// The tokenizer
//===----------------------------------------------------------------------===//

class TokenizerImpl {
public:
  std::string file;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> preTokenizer;
  std::unique_ptr<Decoder> decoder;
  PostProcessor post;

  // BPE model
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::string> idToToken;
  std::vector<uint8_t> special;
  struct Merge { int32_t rank, id; };
  std::unordered_map<uint64_t, Merge, PairHash> merges;
  int32_t unkId = -1;
  bool fuseUnk = false, byteFallback = false, ignoreMerges = false;
  std::string continuingPrefix, endSuffix;
  int32_t byteIds[256];

  std::vector<AddedToken> added;
  AddedTrie rawTrie, normalizedTrie;

  mutable std::mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  void load(const json &root, BigParts &big);
  void encodeWord(const std::string &word, std::vector<int32_t> &out) const;
  void encodeSegment(std::string text, bool startsInput,
                     std::vector<int32_t> &out) const;
  void splitAdded(std::string_view text, const AddedTrie &trie,
                  std::vector<std::pair<std::string, int32_t>> &out) const;
};

void TokenizerImpl::load(const json &root, BigParts &big) {
  Where w{file, ""};
  if (!root.is_object())
    w.fail("expected a JSON object at the top level");
  const json &model = member(root, "model", w);
  Where wm = w.sub("model");
  std::string type = optString(model, "type", wm, "BPE");
  if (type != "BPE")
    wm.sub("type").fail("model type '" + type +
                        "' is not supported (supported: BPE)");
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      model["dropout"].get<double>() != 0.0)
    wm.sub("dropout").fail("BPE dropout is for training; expected null");

  if (!big.haveVocab) {
    member(model, "vocab", wm); // fails when missing
    wm.sub("vocab").fail("expected an object of token -> id");
  }
  if (big.badVocab)
    wm.sub("vocab").fail("token '" + big.badVocabToken + "': expected an id in [0, 2^31)");
  int32_t maxId = -1;
  std::string maxToken; // the token with the largest id
  vocab.reserve(big.vocab.size());
  for (auto &[token, id64] : big.vocab) {
    if (id64 < 0 || id64 > INT32_MAX)
      wm.sub("vocab").fail("token '" + token + "': expected an id in [0, 2^31)");
    int32_t id = static_cast<int32_t>(id64);
    if (!vocab.emplace(token, id).second)
      wm.sub("vocab").fail("token '" + token + "' appears twice");
    if (id > maxId) {
      maxId = id;
      maxToken = token;
    }
  }
  big.vocab.clear();
  big.vocab.shrink_to_fit();

  // Added tokens may extend the id space beyond the model's vocabulary.
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    const json &list = root["added_tokens"];
    Where wa = w.sub("added_tokens");
    if (!list.is_array())
      wa.fail("expected an array");
    for (size_t i = 0; i < list.size(); ++i) {
      Where wi = wa.at(i);
      const json &a = list[i];
      AddedToken t;
      t.content = stringMember(a, "content", wi);
      if (t.content.empty())
        wi.sub("content").fail("an added token cannot be empty");
      const json &id = member(a, "id", wi);
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        wi.sub("id").fail("expected an id in [0, 2^31)");
      t.id = id.get<int32_t>();
      t.special = optBool(a, "special", wi, false);
      t.lstrip = optBool(a, "lstrip", wi, false);
      t.rstrip = optBool(a, "rstrip", wi, false);
      t.singleWord = optBool(a, "single_word", wi, false);
      t.normalized = optBool(a, "normalized", wi, !t.special);
      if (t.id > maxId) {
        maxId = t.id;
        maxToken = t.content;
      }
      added.push_back(t);
    }
  }
  if (maxId < 0)
    wm.sub("vocab").fail("the vocabulary is empty");
  // Ids index a table: a few gaps are fine (a padded vocabulary), an id
  // space mostly empty is a damaged or hostile file (id 2^30 would ask for
  // tens of gigabytes).
  size_t defined = vocab.size() + added.size();
  if (static_cast<size_t>(maxId) >= 2 * defined + 256)
    wm.sub("vocab").fail("token '" + maxToken + "' has id " + std::to_string(maxId) +
                         " but only " + std::to_string(defined) +
                         " tokens are defined; expected ids below " +
                         std::to_string(2 * defined + 256));
  idToToken.assign(static_cast<size_t>(maxId) + 1, std::string());
  special.assign(idToToken.size(), 0);
  for (auto &[tok, id] : vocab)
    idToToken[id] = tok;
  for (size_t i = 0; i < added.size(); ++i) {
    const AddedToken &t = added[i];
    auto it = vocab.find(t.content);
    if (it != vocab.end() && it->second != t.id)
      w.sub("added_tokens").at(i).fail("'" + t.content + "' has id " +
                                       std::to_string(t.id) + " but model.vocab gives " +
                                       std::to_string(it->second));
    idToToken[t.id] = t.content;
    special[t.id] = t.special;
    (t.normalized ? normalizedTrie : rawTrie).add(t.content, static_cast<int32_t>(i));
  }

  continuingPrefix = optString(model, "continuing_subword_prefix", wm);
  endSuffix = optString(model, "end_of_word_suffix", wm);
  fuseUnk = optBool(model, "fuse_unk", wm, false);
  byteFallback = optBool(model, "byte_fallback", wm, false);
  ignoreMerges = optBool(model, "ignore_merges", wm, false);
  std::string unk = optString(model, "unk_token", wm);
  if (!unk.empty()) {
    auto it = vocab.find(unk);
    if (it == vocab.end())
      wm.sub("unk_token").fail("'" + unk + "' is not in model.vocab");
    unkId = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = vocab.find(name);
    byteIds[b] = it == vocab.end() ? -1 : it->second;
  }

  if (!big.haveMerges) {
    member(model, "merges", wm);
    wm.sub("merges").fail("expected an array");
  }
  merges.reserve(big.merges.size());
  for (size_t i = 0; i < big.merges.size(); ++i) {
    MergeItem &item = big.merges[i];
    if (item.bad)
      wm.sub("merges").at(i).fail("expected \"left right\" or [left, right]");
    std::string a, b;
    if (item.line) {
      const std::string &line = item.a;
      size_t sp = line.find(' ');
      if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
        wm.sub("merges").at(i).fail("expected \"left right\", got '" + line + "'");
      a = line.substr(0, sp);
      b = line.substr(sp + 1);
    } else {
      a = std::move(item.a);
      b = std::move(item.b);
    }
    auto lookup = [&](const std::string &t) {
      auto it = vocab.find(t);
      if (it == vocab.end())
        wm.sub("merges").at(i).fail("'" + t + "' is not in model.vocab");
      return it->second;
    };
    int32_t ia = lookup(a), ib = lookup(b);
    std::string merged = a + (continuingPrefix.empty() || b.rfind(continuingPrefix, 0) != 0
                                  ? b
                                  : b.substr(continuingPrefix.size()));
    int32_t im = lookup(merged);
    uint64_t key = (static_cast<uint64_t>(ia) << 32) | static_cast<uint32_t>(ib);
    merges.emplace(key, Merge{static_cast<int32_t>(i), im}); // first rank wins
  }

  normalizer = parseNormalizer(root.value("normalizer", json()), w.sub("normalizer"));
  preTokenizer =
      parsePreTokenizer(root.value("pre_tokenizer", json()), w.sub("pre_tokenizer"));
  decoder = parseDecoder(root.value("decoder", json()), w.sub("decoder"));
  parsePostProcessor(root.value("post_processor", json()), w.sub("post_processor"),
                     vocab, post);
}

void TokenizerImpl::encodeWord(const std::string &word,
                               std::vector<int32_t> &out) const {
  if (ignoreMerges) {
    auto it = vocab.find(word);
    if (it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  {
    std::lock_guard<std::mutex> lock(cacheMutex);
    auto it = cache.find(word);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }

  // Initial symbols: one per character (or its bytes, or unk).
  std::vector<int32_t> sym;
  sym.reserve(word.size());
  bool lastUnk = false;
  size_t nchars = 0;
  for (size_t i = 0; i < word.size(); i += charLen(word[i]))
    ++nchars;
  size_t ci = 0;
  for (size_t i = 0; i < word.size(); ++ci) {
    size_t n = charLen(word[i]);
    std::string piece = word.substr(i, n);
    if (ci > 0 && !continuingPrefix.empty())
      piece.insert(0, continuingPrefix);
    if (ci + 1 == nchars && !endSuffix.empty())
      piece += endSuffix;
    auto it = vocab.find(piece);
    if (it != vocab.end()) {
      sym.push_back(it->second);
      lastUnk = false;
    } else {
      bool bytesOk = byteFallback;
      for (size_t k = 0; bytesOk && k < n; ++k)
        bytesOk = byteIds[static_cast<unsigned char>(word[i + k])] >= 0;
      if (bytesOk) {
        for (size_t k = 0; k < n; ++k)
          sym.push_back(byteIds[static_cast<unsigned char>(word[i + k])]);
        lastUnk = false;
      } else {
        if (unkId < 0)
          throw TextError(file + ": model.unk_token: the text holds '" +
                          word.substr(i, n) +
                          "', which has no token, and no unk_token is set");
        if (!(fuseUnk && lastUnk))
          sym.push_back(unkId);
        lastUnk = true;
      }
    }
    i += n;
  }

  // Merge the lowest-ranked adjacent pair until none is left.
  size_t n = sym.size();
  std::vector<int32_t> prev(n), next(n);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Cand {
    int32_t rank, pos, left, right;
    bool operator>(const Cand &o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
  auto consider = [&](int32_t i) {
    if (i < 0 || next[i] < 0)
      return;
    uint64_t key = (static_cast<uint64_t>(sym[i]) << 32) |
                   static_cast<uint32_t>(sym[next[i]]);
    auto it = merges.find(key);
    if (it != merges.end())
      queue.push({it->second.rank, i, sym[i], sym[next[i]]});
  };
  for (size_t i = 0; i + 1 < n; ++i)
    consider(static_cast<int32_t>(i));
  std::vector<uint8_t> dead(n, 0);
  while (!queue.empty()) {
    Cand c = queue.top();
    queue.pop();
    int32_t i = c.pos;
    if (dead[i] || next[i] < 0 || sym[i] != c.left || sym[next[i]] != c.right)
      continue;
    int32_t j = next[i];
    uint64_t key = (static_cast<uint64_t>(sym[i]) << 32) | static_cast<uint32_t>(sym[j]);
    sym[i] = merges.find(key)->second.id;
    dead[j] = 1;
    next[i] = next[j];
    if (next[j] >= 0)
      prev[next[j]] = i;
    consider(prev[i]);
    consider(i);
  }
  std::vector<int32_t> result;
  for (int32_t i = n ? 0 : -1; i >= 0; i = next[i])
    result.push_back(sym[i]);
  out.insert(out.end(), result.begin(), result.end());

  std::lock_guard<std::mutex> lock(cacheMutex);
  if (cache.size() >= 65536)
    cache.clear();
  cache.emplace(word, std::move(result));
}

void TokenizerImpl::splitAdded(
    std::string_view text, const AddedTrie &trie,
    std::vector<std::pair<std::string, int32_t>> &out) const {
  // (text, -1) for plain segments, ("", index) for added tokens.
  if (trie.empty()) {
    out.emplace_back(std::string(text), -1);
    return;
  }
  auto isWordChar = [&](size_t i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    return std::isalnum(c) || c == '_' || c >= 0x80;
  };
  size_t segStart = 0, i = 0;
  while (i < text.size()) {
    size_t len = 0;
    int32_t idx = trie.longestAt(text, i, &len);
    if (idx >= 0) {
      const AddedToken &t = added[idx];
      size_t b = i, e = i + len;
      if (t.singleWord && ((b > 0 && isWordChar(b - 1)) ||
                           (e < text.size() && isWordChar(e)))) {
        idx = -1;
      } else {
        if (t.lstrip)
          while (b > segStart && isAsciiSpace(text[b - 1]))
            --b;
        if (t.rstrip)
          while (e < text.size() && isAsciiSpace(text[e]))
            ++e;
        if (b > segStart)
          out.emplace_back(std::string(text.substr(segStart, b - segStart)), -1);
        out.emplace_back(std::string(), idx);
        i = segStart = e;
        continue;
      }
    }
    i += charLen(text[i]);
  }
  if (segStart < text.size())
    out.emplace_back(std::string(text.substr(segStart)), -1);
}

void TokenizerImpl::encodeSegment(std::string text, bool startsInput,
                                  std::vector<int32_t> &out) const {
  Pieces pieces{std::move(text)};
  if (preTokenizer)
    preTokenizer->apply(pieces, startsInput);
  for (auto &p : pieces)
    encodeWord(p, out);
}

//===----------------------------------------------------------------------===//
// Public interface
//===----------------------------------------------------------------------===//

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::fromJson(std::string_view text,
                                               const std::string &name) {
  json root;
  BigParts big;
  TokenizerSax sax(root, big);
  try {
    json::sax_parse(text.begin(), text.end(), &sax);
  } catch (const json::exception &e) {
    throw TextError(name + ": not valid JSON (byte " + std::to_string(sax.errorByte) +
                    "): " + e.what());
  }
  auto impl = std::make_unique<TokenizerImpl>();
  impl->file = name;
  try {
    impl->load(root, big);
  } catch (const json::exception &e) {
    throw TextError(name + ": unexpected JSON value: " + e.what());
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string &path) {
  std::string file = path;
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    file = path + (path.empty() || path.back() == '/' ? "" : "/") + "tokenizer.json";
  if (stat(file.c_str(), &st) != 0)
    throw TextError(file + ": cannot open: " + std::strerror(errno) +
                    (file == path ? "" : " (expected a tokenizer.json in the folder)"));
  if (!S_ISREG(st.st_mode))
    throw TextError(file + ": not a regular file");
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw TextError(file + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return fromJson(ss.str(), file);
}

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool addSpecial) const {
  const TokenizerImpl &t = *impl;
  std::string text;
  sanitizeUtf8(input, text);
  std::vector<int32_t> out;
  if (addSpecial)
    out = t.post.before;
  std::vector<std::pair<std::string, int32_t>> outer;
  t.splitAdded(text, t.rawTrie, outer);
  bool first = true;
  for (auto &[seg, idx] : outer) {
    if (idx >= 0) {
      out.push_back(t.added[idx].id);
      first = false;
      continue;
    }
    if (t.normalizer)
      t.normalizer->apply(seg);
    std::vector<std::pair<std::string, int32_t>> inner;
    t.splitAdded(seg, t.normalizedTrie, inner);
    for (auto &[piece, k] : inner) {
      if (k >= 0)
        out.push_back(t.added[k].id);
      else
        t.encodeSegment(std::move(piece), first, out);
      first = false;
    }
  }
  if (addSpecial)
    out.insert(out.end(), t.post.after.begin(), t.post.after.end());
  return out;
}

std::string Tokenizer::decodeBytes(const int32_t *ids, size_t n,
                                   bool skipSpecial) const {
  const TokenizerImpl &t = *impl;
  std::vector<std::string> tokens;
  tokens.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    int32_t id = ids[i];
    if (id < 0 || static_cast<size_t>(id) >= t.idToToken.size())
      throw TextError(t.file + ": token id " + std::to_string(id) +
                      " is outside the vocabulary [0, " +
                      std::to_string(t.idToToken.size()) + ")");
    if (skipSpecial && t.special[id])
      continue;
    tokens.push_back(t.idToToken[id]);
  }
  if (!t.decoder) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i)
      joined += (i ? " " : "") + tokens[i];
    return joined;
  }
  t.decoder->apply(tokens);
  std::string out;
  for (auto &s : tokens)
    out += s;
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids, bool skipSpecial) const {
  std::string raw = decodeBytes(ids.data(), ids.size(), skipSpecial), out;
  sanitizeUtf8(raw, out);
  return out;
}

int32_t Tokenizer::vocabSize() const { return static_cast<int32_t>(impl->idToToken.size()); }

std::optional<int32_t> Tokenizer::tokenId(std::string_view content) const {
  for (const AddedToken &a : impl->added)
    if (a.content == content)
      return a.id;
  auto it = impl->vocab.find(std::string(content));
  if (it == impl->vocab.end())
    return std::nullopt;
  return it->second;
}

const std::string &Tokenizer::tokenString(int32_t id) const {
  static const std::string empty;
  if (id < 0 || static_cast<size_t>(id) >= impl->idToToken.size())
    return empty;
  return impl->idToToken[id];
}

bool Tokenizer::isSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl->special.size() && impl->special[id];
}

const std::string &Tokenizer::path() const { return impl->file; }

//===----------------------------------------------------------------------===//
// Streaming decode
//===----------------------------------------------------------------------===//

DecodeStream::DecodeStream(const Tokenizer &tokenizer, bool skipSpecial)
    : tokenizer(tokenizer), skipSpecial(skipSpecial) {}

void DecodeStream::push(int32_t id, std::string &out) {
  ids.push_back(id);
  std::string raw = tokenizer.decodeBytes(ids.data(), ids.size(), skipSpecial);
  std::string_view tail(raw);
  tail.remove_prefix(std::min(prefixBytes, raw.size()));
  bool invalid = false;
  size_t complete = completeUtf8Prefix(tail, &invalid);
  if (invalid) {
    std::string fixed;
    sanitizeUtf8(tail, fixed);
    out += fixed;
    complete = tail.size();
  } else {
    out.append(tail.data(), complete);
  }
  prefixBytes += complete;
  if (prefixBytes >= raw.size()) {
    // Everything is out: keep the last token as context so that decoders
    // that treat the first token differently see it as a continuation.
    ids.assign(1, id);
    prefixBytes = tokenizer.decodeBytes(ids.data(), 1, skipSpecial).size();
  }
}

void DecodeStream::flush(std::string &out) {
  std::string raw = tokenizer.decodeBytes(ids.data(), ids.size(), skipSpecial);
  if (raw.size() > prefixBytes) {
    std::string fixed;
    sanitizeUtf8(std::string_view(raw).substr(prefixBytes), fixed);
    out += fixed;
  }
  ids.clear();
  prefixBytes = 0;
}

} // namespace spark::text
