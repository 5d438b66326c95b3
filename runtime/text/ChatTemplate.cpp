//===- ChatTemplate.cpp - a Jinja interpreter for chat templates ----------===//
//
// Lexer -> recursive-descent parser -> tree of nodes -> evaluation over
// Python-like values. Semantics follow Jinja2 3.1 in the environment
// transformers uses for chat templates (see ChatTemplate.h); where Python
// decides (str(), repr(), json.dumps, slicing, floor division), Python's
// rule is followed.
//
//===----------------------------------------------------------------------===//
#include "ChatTemplate.h"
#include "Tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <unordered_map>

namespace spark::text {

namespace {

using ojson = nlohmann::ordered_json;

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

struct Value;
struct MacroDef;
using List = std::vector<Value>;
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  Value *find(const std::string &key);
  void set(const std::string &key, Value v);
};

struct Value {
  enum class K { Undefined, None, Bool, Int, Float, Str, List, Dict, Macro };
  K k = K::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<const MacroDef> macro;
  std::string undefinedName; // for messages

  static Value undefined(std::string name = "") {
    Value v;
    v.undefinedName = std::move(name);
    return v;
  }
  static Value none() { Value v; v.k = K::None; return v; }
  static Value boolean(bool x) { Value v; v.k = K::Bool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.k = K::Int; v.i = x; return v; }
  static Value real(double x) { Value v; v.k = K::Float; v.f = x; return v; }
  static Value str(std::string x) { Value v; v.k = K::Str; v.s = std::move(x); return v; }
  static Value newList(List x = {}) {
    Value v; v.k = K::List; v.list = std::make_shared<List>(std::move(x)); return v;
  }
  static Value newDict() {
    Value v; v.k = K::Dict; v.dict = std::make_shared<Dict>(); return v;
  }
  bool isUndefined() const { return k == K::Undefined; }
  bool isNumber() const { return k == K::Int || k == K::Float || k == K::Bool; }
  double number() const { return k == K::Float ? f : k == K::Bool ? b : double(i); }
};

Value *Dict::find(const std::string &key) {
  for (auto &kv : items)
    if (kv.first == key)
      return &kv.second;
  return nullptr;
}
void Dict::set(const std::string &key, Value v) {
  if (Value *p = find(key))
    *p = std::move(v);
  else
    items.emplace_back(key, std::move(v));
}

Value fromJson(const ojson &j) {
  switch (j.type()) {
  case ojson::value_t::null:
    return Value::none();
  case ojson::value_t::boolean:
    return Value::boolean(j.get<bool>());
  case ojson::value_t::number_integer:
  case ojson::value_t::number_unsigned:
    return Value::integer(j.get<int64_t>());
  case ojson::value_t::number_float:
    return Value::real(j.get<double>());
  case ojson::value_t::string:
    return Value::str(j.get<std::string>());
  case ojson::value_t::array: {
    Value v = Value::newList();
    for (auto &e : j)
      v.list->push_back(fromJson(e));
    return v;
  }
  case ojson::value_t::object: {
    Value v = Value::newDict();
    for (auto it = j.begin(); it != j.end(); ++it)
      v.dict->items.emplace_back(it.key(), fromJson(it.value()));
    return v;
  }
  default:
    return Value::none();
  }
}

bool truthy(const Value &v) {
  switch (v.k) {
  case Value::K::Undefined:
  case Value::K::None:
    return false;
  case Value::K::Bool:
    return v.b;
  case Value::K::Int:
    return v.i != 0;
  case Value::K::Float:
    return v.f != 0;
  case Value::K::Str:
    return !v.s.empty();
  case Value::K::List:
    return !v.list->empty();
  case Value::K::Dict:
    return !v.dict->items.empty();
  case Value::K::Macro:
    return true;
  }
  return false;
}

/// Python's repr() of a float: the shortest text that reads back the same.
std::string floatRepr(double x) {
  if (std::isnan(x))
    return "nan";
  if (std::isinf(x))
    return x < 0 ? "-inf" : "inf";
  char buf[32];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, x);
    if (std::strtod(buf, nullptr) == x)
      break;
  }
  std::string s = buf;
  // Python writes exponents as e+XX / e-XX with at least two digits and
  // switches to them at 1e16; %g switches at the precision. Re-format.
  size_t e = s.find('e');
  int exponent = e == std::string::npos ? 0 : std::atoi(s.c_str() + e + 1);
  std::string digits = s.substr(0, e);
  bool neg = !digits.empty() && digits[0] == '-';
  if (neg)
    digits.erase(0, 1);
  std::string mant;
  for (char c : digits)
    if (c != '.')
      mant += c;
  int pointPos = int(digits.find('.'));
  if (pointPos < 0)
    pointPos = int(digits.size());
  // Strip leading zeros of mant, adjusting the decimal exponent.
  int decExp = pointPos + exponent; // position of the point in mant
  size_t lead = 0;
  while (lead + 1 < mant.size() && mant[lead] == '0') {
    ++lead;
    --decExp;
  }
  mant = mant.substr(lead);
  while (mant.size() > 1 && mant.back() == '0')
    mant.pop_back();
  int sciExp = decExp - 1;
  std::string out;
  if (sciExp >= 16 || sciExp < -4) {
    out = mant.substr(0, 1);
    if (mant.size() > 1)
      out += "." + mant.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", sciExp < 0 ? '-' : '+', std::abs(sciExp));
    out += eb;
  } else if (decExp <= 0) {
    out = "0." + std::string(-decExp, '0') + mant;
  } else if (decExp >= int(mant.size())) {
    out = mant + std::string(decExp - mant.size(), '0') + ".0";
  } else {
    out = mant.substr(0, decExp) + "." + mant.substr(decExp);
  }
  return (neg ? "-" : "") + out;
}

std::string pyRepr(const Value &v);

/// Python's str().
std::string pyStr(const Value &v) {
  switch (v.k) {
  case Value::K::Undefined:
    return "";
  case Value::K::None:
    return "None";
  case Value::K::Bool:
    return v.b ? "True" : "False";
  case Value::K::Int:
    return std::to_string(v.i);
  case Value::K::Float:
    return floatRepr(v.f);
  case Value::K::Str:
    return v.s;
  case Value::K::Macro:
    return "<macro>";
  default:
    return pyRepr(v);
  }
}

std::string strRepr(const std::string &s) {
  bool single = s.find('\'') == std::string::npos || s.find('"') != std::string::npos;
  char q = single ? '\'' : '"';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == static_cast<unsigned char>(q))
      out += std::string("\\") + q;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7F) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else
      out += static_cast<char>(c);
  }
  return out + q;
}

std::string pyRepr(const Value &v) {
  switch (v.k) {
  case Value::K::Str:
    return strRepr(v.s);
  case Value::K::List: {
    std::string out = "[";
    for (size_t i = 0; i < v.list->size(); ++i)
      out += (i ? ", " : "") + pyRepr((*v.list)[i]);
    return out + "]";
  }
  case Value::K::Dict: {
    std::string out = "{";
    for (size_t i = 0; i < v.dict->items.size(); ++i)
      out += (i ? ", " : "") + strRepr(v.dict->items[i].first) + ": " +
             pyRepr(v.dict->items[i].second);
    return out + "}";
  }
  default:
    return pyStr(v);
  }
}

void jsonString(const std::string &s, std::string &out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    case '\b': out += "\\b"; break;
    case '\f': out += "\\f"; break;
    default:
      if (c < 0x20) {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", c);
        out += b;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  out += '"';
}

/// json.dumps(v, ensure_ascii=False, indent=indent) as transformers' tojson.
bool toJson(const Value &v, int indent, int depth, std::string &out) {
  auto newline = [&](int d) {
    if (indent < 0)
      return;
    out += '\n';
    out.append(size_t(indent) * d, ' ');
  };
  switch (v.k) {
  case Value::K::None: out += "null"; return true;
  case Value::K::Bool: out += v.b ? "true" : "false"; return true;
  case Value::K::Int: out += std::to_string(v.i); return true;
  case Value::K::Float:
    out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f < 0 ? "-Infinity" : "Infinity")
                                                     : floatRepr(v.f);
    return true;
  case Value::K::Str: jsonString(v.s, out); return true;
  case Value::K::List: {
    if (v.list->empty()) { out += "[]"; return true; }
    out += '[';
    for (size_t i = 0; i < v.list->size(); ++i) {
      if (i) out += indent < 0 ? ", " : ",";
      newline(depth + 1);
      if (!toJson((*v.list)[i], indent, depth + 1, out)) return false;
    }
    newline(depth);
    out += ']';
    return true;
  }
  case Value::K::Dict: {
    if (v.dict->items.empty()) { out += "{}"; return true; }
    out += '{';
    for (size_t i = 0; i < v.dict->items.size(); ++i) {
      if (i) out += indent < 0 ? ", " : ",";
      newline(depth + 1);
      jsonString(v.dict->items[i].first, out);
      out += ": ";
      if (!toJson(v.dict->items[i].second, indent, depth + 1, out)) return false;
    }
    newline(depth);
    out += '}';
    return true;
  }
  default:
    return false;
  }
}

bool equal(const Value &a, const Value &b) {
  if (a.isNumber() && b.isNumber())
    return a.number() == b.number();
  if (a.k != b.k)
    return false;
  switch (a.k) {
  case Value::K::Undefined:
  case Value::K::None:
    return true;
  case Value::K::Str:
    return a.s == b.s;
  case Value::K::List:
    if (a.list->size() != b.list->size())
      return false;
    for (size_t i = 0; i < a.list->size(); ++i)
      if (!equal((*a.list)[i], (*b.list)[i]))
        return false;
    return true;
  case Value::K::Dict:
    if (a.dict->items.size() != b.dict->items.size())
      return false;
    for (auto &kv : a.dict->items) {
      Value *o = b.dict->find(kv.first);
      if (!o || !equal(kv.second, *o))
        return false;
    }
    return true;
  default:
    return a.macro == b.macro;
  }
}

/// Code points of a UTF-8 string, as byte offsets (for slicing by character).
std::vector<size_t> charOffsets(const std::string &s) {
  std::vector<size_t> off;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80)
      off.push_back(i);
  return off;
}

//===----------------------------------------------------------------------===//
// Syntax tree
//===----------------------------------------------------------------------===//

struct Context;

struct RenderError {
  int line;
  std::string message;
};
[[noreturn]] void fail(int line, const std::string &message) { throw RenderError{line, message}; }

struct Expr {
  int line = 0;
  virtual ~Expr() = default;
  virtual Value eval(Context &c) const = 0;
};
using ExprP = std::unique_ptr<Expr>;

} // namespace

struct TemplateNode {
  int line = 0;
  virtual ~TemplateNode() = default;
  enum Flow { Normal, Break, Continue };
  virtual Flow exec(Context &c) const = 0;
};

namespace {
using NodeP = std::unique_ptr<TemplateNode>;

struct MacroDef {
  std::string name;
  std::vector<std::pair<std::string, ExprP>> params; // default may be null
  std::vector<NodeP> body;
};

struct Context {
  std::vector<std::unordered_map<std::string, Value>> scopes;
  std::string out;
  int depth = 0;

  Value lookup(const std::string &name) const {
    for (auto it = scopes.rbegin(); it != scopes.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end())
        return f->second;
    }
    return Value::undefined(name);
  }
  void set(const std::string &name, Value v) { scopes.back()[name] = std::move(v); }
};

TemplateNode::Flow execBody(const std::vector<NodeP> &body, Context &c) {
  for (auto &n : body) {
    auto f = n->exec(c);
    if (f != TemplateNode::Normal)
      return f;
  }
  return TemplateNode::Normal;
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

struct Literal : Expr {
  Value v;
  Value eval(Context &) const override { return v; }
};

struct Name : Expr {
  std::string name;
  Value eval(Context &c) const override { return c.lookup(name); }
};

struct ListExpr : Expr {
  std::vector<ExprP> items;
  Value eval(Context &c) const override {
    Value v = Value::newList();
    for (auto &e : items)
      v.list->push_back(e->eval(c));
    return v;
  }
};

struct DictExpr : Expr {
  std::vector<std::pair<ExprP, ExprP>> items;
  Value eval(Context &c) const override {
    Value v = Value::newDict();
    for (auto &[k, e] : items) {
      Value key = k->eval(c);
      if (key.k != Value::K::Str)
        fail(line, "dictionary keys must be strings here");
      v.dict->set(key.s, e->eval(c));
    }
    return v;
  }
};

Value getItem(const Value &obj, const Value &key, int line) {
  if (obj.k == Value::K::Dict) {
    if (key.k == Value::K::Str)
      if (Value *v = obj.dict->find(key.s))
        return *v;
    return Value::undefined(key.k == Value::K::Str ? key.s : pyStr(key));
  }
  if ((obj.k == Value::K::List || obj.k == Value::K::Str) &&
      (key.k == Value::K::Int || key.k == Value::K::Bool)) {
    if (obj.k == Value::K::List) {
      int64_t n = int64_t(obj.list->size()), i = key.number() < 0 ? n + int64_t(key.number()) : int64_t(key.number());
      if (i < 0 || i >= n)
        return Value::undefined("[" + pyStr(key) + "]");
      return (*obj.list)[i];
    }
    auto off = charOffsets(obj.s);
    int64_t n = int64_t(off.size()), i = key.i < 0 ? n + key.i : key.i;
    if (i < 0 || i >= n)
      return Value::undefined("[" + pyStr(key) + "]");
    size_t end = i + 1 < n ? off[i + 1] : obj.s.size();
    return Value::str(obj.s.substr(off[i], end - off[i]));
  }
  if (obj.isUndefined())
    fail(line, "'" + (obj.undefinedName.empty() ? std::string("value") : obj.undefinedName) +
                   "' is undefined");
  return Value::undefined(pyStr(key));
}

Value getAttr(const Value &obj, const std::string &name, int line) {
  if (obj.k == Value::K::Dict) {
    if (Value *v = obj.dict->find(name))
      return *v;
    return Value::undefined(name);
  }
  if (obj.isUndefined())
    fail(line, "'" + (obj.undefinedName.empty() ? std::string("value") : obj.undefinedName) +
                   "' is undefined (reading ." + name + ")");
  return Value::undefined(name);
}

struct GetAttr : Expr {
  ExprP obj;
  std::string name;
  Value eval(Context &c) const override { return getAttr(obj->eval(c), name, line); }
};

struct GetItem : Expr {
  ExprP obj, key;
  Value eval(Context &c) const override { return getItem(obj->eval(c), key->eval(c), line); }
};

struct SliceExpr : Expr {
  ExprP obj, start, stop, step;
  Value eval(Context &c) const override {
    Value o = obj->eval(c);
    auto opt = [&](const ExprP &e, bool &has) -> int64_t {
      has = false;
      if (!e)
        return 0;
      Value v = e->eval(c);
      if (v.k == Value::K::None)
        return 0;
      if (v.k != Value::K::Int)
        fail(line, "slice indices must be integers");
      has = true;
      return v.i;
    };
    bool hasA, hasB, hasS;
    int64_t a = opt(start, hasA), b = opt(stop, hasB), s = opt(step, hasS);
    if (!hasS)
      s = 1;
    if (s == 0)
      fail(line, "slice step cannot be zero");
    std::vector<size_t> off;
    int64_t n;
    if (o.k == Value::K::List)
      n = int64_t(o.list->size());
    else if (o.k == Value::K::Str)
      off = charOffsets(o.s), n = int64_t(off.size());
    else
      fail(line, "only lists and strings can be sliced");
    auto clamp = [&](int64_t x, bool has, bool isStart) {
      if (!has)
        return s > 0 ? (isStart ? 0 : n) : (isStart ? n - 1 : -1);
      if (x < 0)
        x += n;
      if (s > 0)
        return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    int64_t i0 = clamp(a, hasA, true), i1 = clamp(b, hasB, false);
    std::vector<int64_t> idx;
    for (int64_t i = i0; s > 0 ? i < i1 : i > i1; i += s)
      idx.push_back(i);
    if (o.k == Value::K::List) {
      Value r = Value::newList();
      for (int64_t i : idx)
        r.list->push_back((*o.list)[i]);
      return r;
    }
    std::string r;
    for (int64_t i : idx) {
      size_t end = i + 1 < n ? off[i + 1] : o.s.size();
      r += o.s.substr(off[i], end - off[i]);
    }
    return Value::str(r);
  }
};

struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value *get(size_t i, const char *name) const {
    if (i < pos.size())
      return &pos[i];
    for (auto &kv : kw)
      if (kv.first == name)
        return &kv.second;
    return nullptr;
  }
};

struct ArgExprs {
  std::vector<ExprP> pos;
  std::vector<std::pair<std::string, ExprP>> kw;
  Args eval(Context &c) const {
    Args a;
    for (auto &e : pos)
      a.pos.push_back(e->eval(c));
    for (auto &[k, e] : kw)
      a.kw.emplace_back(k, e->eval(c));
    return a;
  }
};

std::string requireStr(const Value &v, int line, const char *what) {
  if (v.k != Value::K::Str)
    fail(line, std::string(what) + " expects a string, got " + pyRepr(v));
  return v.s;
}

bool isSpaceChar(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string strip(const std::string &s, const Value *chars, bool left, bool right) {
  auto inSet = [&](char c) {
    return chars && chars->k == Value::K::Str ? chars->s.find(c) != std::string::npos
                                               : isSpaceChar(static_cast<unsigned char>(c));
  };
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && inSet(s[b]))
      ++b;
  if (right)
    while (e > b && inSet(s[e - 1]))
      --e;
  return s.substr(b, e - b);
}

Value callMacro(const MacroDef &m, const Args &a, Context &c, int line);

Value callMethod(const Value &obj, const std::string &name, const Args &a, int line,
                 Context &c) {
  if (obj.k == Value::K::Str) {
    const std::string &s = obj.s;
    if (name == "startswith" || name == "endswith") {
      const Value *x = a.get(0, "prefix");
      if (!x)
        fail(line, name + "() needs an argument");
      std::vector<std::string> opts;
      if (x->k == Value::K::List)
        for (auto &e : *x->list)
          opts.push_back(requireStr(e, line, name.c_str()));
      else
        opts.push_back(requireStr(*x, line, name.c_str()));
      for (auto &p : opts)
        if (name == "startswith" ? s.compare(0, p.size(), p) == 0
                                 : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0)
          return Value::boolean(true);
      return Value::boolean(false);
    }
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const Value *chars = a.get(0, "chars");
      return Value::str(strip(s, chars, name != "rstrip", name != "lstrip"));
    }
    if (name == "split" || name == "rsplit") {
      const Value *sep = a.get(0, "sep");
      const Value *maxv = a.get(1, "maxsplit");
      int64_t maxsplit = maxv && maxv->k == Value::K::Int ? maxv->i : -1;
      Value r = Value::newList();
      if (!sep || sep->k == Value::K::None) {
        std::vector<std::string> parts;
        size_t i = 0;
        while (i < s.size()) {
          while (i < s.size() && isSpaceChar(s[i]))
            ++i;
          if (i >= s.size())
            break;
          size_t j = i;
          while (j < s.size() && !isSpaceChar(s[j]))
            ++j;
          parts.push_back(s.substr(i, j - i));
          i = j;
        }
        for (auto &p : parts)
          r.list->push_back(Value::str(p));
        return r;
      }
      std::string d = requireStr(*sep, line, "split");
      if (d.empty())
        fail(line, "split(): empty separator");
      std::vector<std::string> parts;
      if (name == "split") {
        size_t pos = 0;
        int64_t n = 0;
        for (;;) {
          size_t hit = s.find(d, pos);
          if (hit == std::string::npos || (maxsplit >= 0 && n >= maxsplit))
            break;
          parts.push_back(s.substr(pos, hit - pos));
          pos = hit + d.size();
          ++n;
        }
        parts.push_back(s.substr(pos));
      } else {
        size_t end = s.size();
        int64_t n = 0;
        for (;;) {
          if (end < d.size())
            break;
          size_t hit = s.rfind(d, end - d.size());
          if (hit == std::string::npos || (maxsplit >= 0 && n >= maxsplit))
            break;
          parts.insert(parts.begin(), s.substr(hit + d.size(), end - hit - d.size()));
          end = hit;
          ++n;
        }
        parts.insert(parts.begin(), s.substr(0, end));
      }
      for (auto &p : parts)
        r.list->push_back(Value::str(p));
      return r;
    }
    if (name == "upper" || name == "lower") {
      std::string r = s;
      for (auto &ch : r)
        ch = name == "upper" ? std::toupper(static_cast<unsigned char>(ch))
                             : std::tolower(static_cast<unsigned char>(ch));
      return Value::str(r);
    }
    if (name == "title" || name == "capitalize") {
      std::string r = s;
      bool start = true;
      for (size_t i = 0; i < r.size(); ++i) {
        unsigned char ch = r[i];
        if (name == "capitalize") {
          r[i] = i == 0 ? std::toupper(ch) : std::tolower(ch);
          continue;
        }
        r[i] = start ? std::toupper(ch) : std::tolower(ch);
        start = !std::isalpha(ch);
      }
      return Value::str(r);
    }
    if (name == "replace") {
      const Value *from = a.get(0, "old"), *to = a.get(1, "new");
      if (!from || !to)
        fail(line, "replace() needs two arguments");
      std::string r = s, f = requireStr(*from, line, "replace"), t = requireStr(*to, line, "replace");
      if (f.empty())
        return Value::str(r);
      std::string out;
      size_t pos = 0, hit;
      while ((hit = r.find(f, pos)) != std::string::npos) {
        out += r.substr(pos, hit - pos) + t;
        pos = hit + f.size();
      }
      return Value::str(out + r.substr(pos));
    }
    if (name == "find" || name == "count") {
      const Value *x = a.get(0, "sub");
      std::string sub = x ? requireStr(*x, line, name.c_str()) : "";
      if (name == "find") {
        size_t p = s.find(sub);
        return Value::integer(p == std::string::npos ? -1 : int64_t(charOffsets(s.substr(0, p)).size()));
      }
      int64_t n = 0;
      for (size_t p = s.find(sub); !sub.empty() && p != std::string::npos; p = s.find(sub, p + sub.size()))
        ++n;
      return Value::integer(n);
    }
    if (name == "join") {
      const Value *x = a.get(0, "iterable");
      std::string out;
      if (x && x->k == Value::K::List)
        for (size_t i = 0; i < x->list->size(); ++i)
          out += (i ? s : "") + pyStr((*x->list)[i]);
      return Value::str(out);
    }
    if (name == "isdigit" || name == "isalpha" || name == "isspace") {
      bool ok = !s.empty();
      for (unsigned char ch : s)
        ok = ok && (name == "isdigit" ? std::isdigit(ch) : name == "isalpha" ? std::isalpha(ch) : isSpaceChar(ch));
      return Value::boolean(ok);
    }
  }
  if (obj.k == Value::K::Dict) {
    if (name == "items") {
      Value r = Value::newList();
      for (auto &kv : obj.dict->items)
        r.list->push_back(Value::newList({Value::str(kv.first), kv.second}));
      return r;
    }
    if (name == "keys" || name == "values") {
      Value r = Value::newList();
      for (auto &kv : obj.dict->items)
        r.list->push_back(name == "keys" ? Value::str(kv.first) : kv.second);
      return r;
    }
    if (name == "get") {
      const Value *k = a.get(0, "key"), *d = a.get(1, "default");
      if (!k)
        fail(line, "get() needs a key");
      if (k->k == Value::K::Str)
        if (Value *v = obj.dict->find(k->s))
          return *v;
      return d ? *d : Value::none();
    }
    if (Value *v = obj.dict->find(name))
      if (v->k == Value::K::Macro)
        return callMacro(*v->macro, a, c, line);
  }
  if (obj.isUndefined())
    fail(line, "'" + obj.undefinedName + "' is undefined (calling ." + name + "())");
  fail(line, "unsupported method ." + name + "() on " + pyRepr(obj).substr(0, 40));
}

struct Call : Expr {
  ExprP callee;
  ArgExprs args;
  Value eval(Context &c) const override;
};

Value makeLoopRange(const Args &a, int line) {
  int64_t start = 0, stop = 0, step = 1;
  auto num = [&](size_t i) {
    if (a.pos[i].k != Value::K::Int)
      fail(line, "range() expects integers");
    return a.pos[i].i;
  };
  if (a.pos.size() == 1)
    stop = num(0);
  else if (a.pos.size() >= 2)
    start = num(0), stop = num(1), step = a.pos.size() > 2 ? num(2) : 1;
  else
    fail(line, "range() needs 1 to 3 arguments");
  if (step == 0)
    fail(line, "range() step cannot be zero");
  Value r = Value::newList();
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    r.list->push_back(Value::integer(i));
    if (r.list->size() > 10'000'000)
      fail(line, "range() too long");
  }
  return r;
}

Value Call::eval(Context &c) const {
  Args a = args.eval(c);
  if (auto *attr = dynamic_cast<const GetAttr *>(callee.get()))
    return callMethod(attr->obj->eval(c), attr->name, a, line, c);
  if (auto *n = dynamic_cast<const Name *>(callee.get())) {
    Value f = c.lookup(n->name);
    if (f.k == Value::K::Macro)
      return callMacro(*f.macro, a, c, line);
    if (n->name == "raise_exception") {
      fail(line, "raise_exception: " + (a.pos.empty() ? std::string() : pyStr(a.pos[0])));
    }
    if (n->name == "range")
      return makeLoopRange(a, line);
    if (n->name == "namespace" || n->name == "dict") {
      Value d = Value::newDict();
      for (auto &kv : a.kw)
        d.dict->set(kv.first, kv.second);
      return d;
    }
    if (n->name == "strftime_now") {
      if (a.pos.empty())
        fail(line, "strftime_now() needs a format");
      std::time_t t = std::time(nullptr);
      std::tm tm;
      localtime_r(&t, &tm);
      char buf[256];
      size_t len = std::strftime(buf, sizeof buf, requireStr(a.pos[0], line, "strftime_now").c_str(), &tm);
      return Value::str(std::string(buf, len));
    }
    fail(line, "'" + n->name + "' is not a function this template engine knows");
  }
  fail(line, "this expression cannot be called");
}

Value applyFilter(const std::string &name, const Value &v, const Args &a, int line, Context &c);
bool applyTest(const std::string &name, const Value &v, const Args &a, int line, Context &c);

struct FilterExpr : Expr {
  ExprP obj;
  std::string name;
  ArgExprs args;
  Value eval(Context &c) const override {
    Value v = obj->eval(c);
    return applyFilter(name, v, args.eval(c), line, c);
  }
};

struct TestExpr : Expr {
  ExprP obj;
  std::string name;
  ArgExprs args;
  bool negated = false;
  Value eval(Context &c) const override {
    Value v = obj->eval(c);
    return Value::boolean(applyTest(name, v, args.eval(c), line, c) != negated);
  }
};

struct NotExpr : Expr {
  ExprP e;
  Value eval(Context &c) const override { return Value::boolean(!truthy(e->eval(c))); }
};

struct NegExpr : Expr {
  ExprP e;
  bool minus = true;
  Value eval(Context &c) const override {
    Value v = e->eval(c);
    if (v.k == Value::K::Int) {
      if (minus && v.i == INT64_MIN)
        fail(line, "integer overflow in unary -: Python's integers are unbounded, the "
                   "template interpreter's have 64 bits");
      return Value::integer(minus ? -v.i : v.i);
    }
    if (v.k == Value::K::Float)
      return Value::real(minus ? -v.f : v.f);
    fail(line, "unary minus on " + pyRepr(v));
  }
};

struct AndOr : Expr {
  ExprP a, b;
  bool isAnd;
  Value eval(Context &c) const override {
    Value x = a->eval(c);
    if (isAnd ? !truthy(x) : truthy(x))
      return x;
    return b->eval(c);
  }
};

struct CondExpr : Expr {
  ExprP cond, then, otherwise;
  Value eval(Context &c) const override {
    if (truthy(cond->eval(c)))
      return then->eval(c);
    return otherwise ? otherwise->eval(c) : Value::undefined();
  }
};

bool contains(const Value &container, const Value &item, int line) {
  switch (container.k) {
  case Value::K::Str:
    return container.s.find(requireStr(item, line, "'in'")) != std::string::npos;
  case Value::K::List:
    for (auto &e : *container.list)
      if (equal(e, item))
        return true;
    return false;
  case Value::K::Dict:
    return item.k == Value::K::Str && container.dict->find(item.s);
  case Value::K::Undefined:
    fail(line, "'" + container.undefinedName + "' is undefined (testing 'in')");
  default:
    fail(line, "'in' needs a string, list or mapping, got " + pyRepr(container));
  }
}

int compare(const Value &a, const Value &b, int line) {
  if (a.isNumber() && b.isNumber())
    return a.number() < b.number() ? -1 : a.number() > b.number() ? 1 : 0;
  if (a.k == Value::K::Str && b.k == Value::K::Str)
    return a.s.compare(b.s) < 0 ? -1 : a.s == b.s ? 0 : 1;
  fail(line, "cannot order " + pyRepr(a) + " and " + pyRepr(b));
}

/// Python's binary operators (and Jinja's ~) on two values.
Value binaryOp(const std::string &op, const Value &x, const Value &y, int line) {
  if (op == "==") return Value::boolean(equal(x, y));
  if (op == "!=") return Value::boolean(!equal(x, y));
  if (op == "<") return Value::boolean(compare(x, y, line) < 0);
  if (op == ">") return Value::boolean(compare(x, y, line) > 0);
  if (op == "<=") return Value::boolean(compare(x, y, line) <= 0);
  if (op == ">=") return Value::boolean(compare(x, y, line) >= 0);
  if (op == "in") return Value::boolean(contains(y, x, line));
  if (op == "not in") return Value::boolean(!contains(y, x, line));
  if (op == "~") return Value::str(pyStr(x) + pyStr(y));
  if (op == "+") {
    if (x.k == Value::K::Str && y.k == Value::K::Str)
      return Value::str(x.s + y.s);
    if (x.k == Value::K::List && y.k == Value::K::List) {
      List l = *x.list;
      l.insert(l.end(), y.list->begin(), y.list->end());
      return Value::newList(std::move(l));
    }
  }
  if (op == "*" && ((x.k == Value::K::Str && y.k == Value::K::Int) || (x.k == Value::K::Int && y.k == Value::K::Str))) {
    const Value &s = x.k == Value::K::Str ? x : y;
    int64_t n = x.k == Value::K::Int ? x.i : y.i;
    std::string r;
    for (int64_t i = 0; i < n && r.size() < (1u << 26); ++i)
      r += s.s;
    return Value::str(r);
  }
  if (!x.isNumber() || !y.isNumber())
    fail(line, "unsupported operand types for " + op + ": " + pyRepr(x).substr(0, 40) + " and " +
                   pyRepr(y).substr(0, 40));
  bool ints = x.k != Value::K::Float && y.k != Value::K::Float;
  int64_t xi = x.k == Value::K::Bool ? x.b : x.i, yi = y.k == Value::K::Bool ? y.b : y.i;
  double xf = x.number(), yf = y.number();
  // Python's integers are unbounded; these have 64 bits, and say so where
  // a result leaves them (templates do not count that high).
  auto overflow = [&]() {
    fail(line, "integer overflow in " + op + ": Python's integers are unbounded, the "
                                             "template interpreter's have 64 bits");
  };
  int64_t r64 = 0;
  if (op == "+") {
    if (!ints) return Value::real(xf + yf);
    if (__builtin_add_overflow(xi, yi, &r64)) overflow();
    return Value::integer(r64);
  }
  if (op == "-") {
    if (!ints) return Value::real(xf - yf);
    if (__builtin_sub_overflow(xi, yi, &r64)) overflow();
    return Value::integer(r64);
  }
  if (op == "*") {
    if (!ints) return Value::real(xf * yf);
    if (__builtin_mul_overflow(xi, yi, &r64)) overflow();
    return Value::integer(r64);
  }
  if (op == "/") {
    if (yf == 0) fail(line, "division by zero");
    return Value::real(xf / yf);
  }
  if (op == "//" || op == "%") {
    if (yf == 0) fail(line, "division by zero");
    if (ints) {
      if (xi == INT64_MIN && yi == -1) overflow();
      int64_t q = xi / yi, r = xi % yi;
      if (r != 0 && ((r < 0) != (yi < 0))) { --q; r += yi; }
      return Value::integer(op == "//" ? q : r);
    }
    double q = std::floor(xf / yf);
    return Value::real(op == "//" ? q : xf - q * yf);
  }
  if (op == "**") {
    if (!ints || yi < 0)
      return Value::real(std::pow(xf, yf));
    if (xi == 0 || xi == 1)
      return Value::integer(yi == 0 ? 1 : xi);
    if (xi == -1)
      return Value::integer(yi % 2 == 0 ? 1 : -1);
    int64_t power = 1; // |xi| >= 2: at most 63 steps before an overflow
    for (int64_t k = 0; k < yi; ++k)
      if (__builtin_mul_overflow(power, xi, &power)) overflow();
    return Value::integer(power);
  }
  fail(line, "unknown operator " + op);
}

struct BinExpr : Expr {
  std::string op;
  ExprP a, b;
  Value eval(Context &c) const override {
    Value x = a->eval(c), y = b->eval(c);
    return binaryOp(op, x, y, line);
  }
};

//===----------------------------------------------------------------------===//
// Filters and tests
//===----------------------------------------------------------------------===//

List iterate(const Value &v, int line) {
  switch (v.k) {
  case Value::K::List:
    return *v.list;
  case Value::K::Dict: {
    List keys;
    for (auto &kv : v.dict->items)
      keys.push_back(Value::str(kv.first));
    return keys;
  }
  case Value::K::Str: {
    List chars;
    auto off = charOffsets(v.s);
    for (size_t i = 0; i < off.size(); ++i)
      chars.push_back(Value::str(v.s.substr(off[i], (i + 1 < off.size() ? off[i + 1] : v.s.size()) - off[i])));
    return chars;
  }
  case Value::K::Undefined:
  case Value::K::None:
    if (v.k == Value::K::None)
      fail(line, "None is not iterable");
    return {};
  default:
    fail(line, pyRepr(v) + " is not iterable");
  }
}

Value attributeOf(const Value &v, const std::string &path, int line) {
  Value cur = v;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    cur = cur.k == Value::K::Dict ? getAttr(cur, part, line) : Value::undefined(part);
    if (dot == std::string::npos)
      break;
    pos = dot + 1;
  }
  return cur;
}

Value applyFilter(const std::string &name, const Value &v, const Args &a, int line, Context &c) {
  if (name == "tojson") {
    const Value *ind = a.get(0, "indent");
    int indent = ind && ind->k == Value::K::Int ? int(ind->i) : -1;
    std::string out;
    if (!toJson(v, indent, 0, out))
      fail(line, "tojson: " + (v.isUndefined() ? "'" + v.undefinedName + "' is undefined"
                                               : "value is not JSON serializable"));
    return Value::str(out);
  }
  if (name == "trim") {
    const Value *chars = a.get(0, "chars");
    return Value::str(strip(pyStr(v), chars, true, true));
  }
  if (name == "length" || name == "count") {
    switch (v.k) {
    case Value::K::Str: return Value::integer(int64_t(charOffsets(v.s).size()));
    case Value::K::List: return Value::integer(int64_t(v.list->size()));
    case Value::K::Dict: return Value::integer(int64_t(v.dict->items.size()));
    case Value::K::Undefined: return Value::integer(0);
    default: fail(line, "length of " + pyRepr(v));
    }
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize")
    return callMethod(Value::str(pyStr(v)), name, a, line, c);
  if (name == "string")
    return Value::str(pyStr(v));
  if (name == "safe" || name == "e" || name == "escape")
    return name == "safe" ? v : Value::str(pyStr(v)); // no autoescape in chat templates
  if (name == "default" || name == "d") {
    const Value *def = a.get(0, "default_value");
    const Value *boolean = a.get(1, "boolean");
    bool useDefault = v.isUndefined() || (boolean && truthy(*boolean) && !truthy(v));
    return useDefault ? (def ? *def : Value::str("")) : v;
  }
  if (name == "first" || name == "last") {
    List l = iterate(v, line);
    if (l.empty())
      return Value::undefined(name);
    return name == "first" ? l.front() : l.back();
  }
  if (name == "list")
    return Value::newList(iterate(v, line));
  if (name == "reverse") {
    if (v.k == Value::K::Str) {
      List l = iterate(v, line);
      std::string r;
      for (auto it = l.rbegin(); it != l.rend(); ++it)
        r += it->s;
      return Value::str(r);
    }
    List l = iterate(v, line);
    std::reverse(l.begin(), l.end());
    return Value::newList(std::move(l));
  }
  if (name == "join") {
    const Value *sep = a.get(0, "d");
    const Value *attr = a.get(1, "attribute");
    std::string out, s = sep ? pyStr(*sep) : "";
    List l = iterate(v, line);
    for (size_t i = 0; i < l.size(); ++i)
      out += (i ? s : "") + pyStr(attr ? attributeOf(l[i], pyStr(*attr), line) : l[i]);
    return Value::str(out);
  }
  if (name == "items") {
    if (v.k != Value::K::Dict)
      fail(line, "items expects a mapping");
    return callMethod(v, "items", a, line, c);
  }
  if (name == "dictsort") {
    if (v.k != Value::K::Dict)
      fail(line, "dictsort expects a mapping");
    auto items = v.dict->items;
    std::stable_sort(items.begin(), items.end(), [](auto &x, auto &y) { return x.first < y.first; });
    Value r = Value::newList();
    for (auto &kv : items)
      r.list->push_back(Value::newList({Value::str(kv.first), kv.second}));
    return r;
  }
  if (name == "int") {
    if (v.k == Value::K::Int) return v;
    if (v.k == Value::K::Float) return Value::integer(int64_t(v.f));
    if (v.k == Value::K::Bool) return Value::integer(v.b);
    if (v.k == Value::K::Str) {
      char *end;
      long long x = std::strtoll(v.s.c_str(), &end, 10);
      return Value::integer(*end ? 0 : x);
    }
    return Value::integer(0);
  }
  if (name == "float") {
    if (v.isNumber()) return Value::real(v.number());
    if (v.k == Value::K::Str) {
      char *end;
      double x = std::strtod(v.s.c_str(), &end);
      return Value::real(*end ? 0.0 : x);
    }
    return Value::real(0);
  }
  if (name == "abs") {
    if (v.k == Value::K::Int) return Value::integer(std::llabs(v.i));
    return Value::real(std::fabs(v.number()));
  }
  if (name == "replace") {
    Args b = a;
    return callMethod(Value::str(pyStr(v)), "replace", b, line, c);
  }
  if (name == "unique") {
    List out;
    for (auto &e : iterate(v, line))
      if (std::none_of(out.begin(), out.end(), [&](const Value &o) { return equal(o, e); }))
        out.push_back(e);
    return Value::newList(std::move(out));
  }
  if (name == "sum") {
    Value total = Value::integer(0);
    for (auto &e : iterate(v, line))
      total = binaryOp("+", total, e, line);
    return total;
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    bool attr = name.find("attr") != std::string::npos;
    bool keep = name[0] == 's';
    List out;
    for (auto &e : iterate(v, line)) {
      size_t k = 0;
      Value subject = e;
      if (attr) {
        if (a.pos.empty())
          fail(line, name + " needs an attribute name");
        subject = attributeOf(e, pyStr(a.pos[0]), line);
        k = 1;
      }
      bool ok;
      if (a.pos.size() > k) {
        Args rest;
        rest.pos.assign(a.pos.begin() + k + 1, a.pos.end());
        ok = applyTest(pyStr(a.pos[k]), subject, rest, line, c);
      } else {
        ok = truthy(subject);
      }
      if (ok == keep)
        out.push_back(e);
    }
    return Value::newList(std::move(out));
  }
  if (name == "map") {
    List out;
    const Value *attr = nullptr;
    for (auto &kv : a.kw)
      if (kv.first == "attribute")
        attr = &kv.second;
    const Value *def = nullptr;
    for (auto &kv : a.kw)
      if (kv.first == "default")
        def = &kv.second;
    for (auto &e : iterate(v, line)) {
      if (attr) {
        Value x = attributeOf(e, pyStr(*attr), line);
        out.push_back(x.isUndefined() && def ? *def : x);
      } else {
        if (a.pos.empty())
          fail(line, "map needs a filter name or attribute=");
        Args rest;
        rest.pos.assign(a.pos.begin() + 1, a.pos.end());
        out.push_back(applyFilter(pyStr(a.pos[0]), e, rest, line, c));
      }
    }
    return Value::newList(std::move(out));
  }
  if (name == "sort") {
    List l = iterate(v, line);
    const Value *attr = nullptr;
    bool rev = false;
    for (auto &kv : a.kw) {
      if (kv.first == "attribute") attr = &kv.second;
      if (kv.first == "reverse") rev = truthy(kv.second);
    }
    std::stable_sort(l.begin(), l.end(), [&](const Value &x, const Value &y) {
      Value kx = attr ? attributeOf(x, pyStr(*attr), line) : x;
      Value ky = attr ? attributeOf(y, pyStr(*attr), line) : y;
      return rev ? compare(ky, kx, line) < 0 : compare(kx, ky, line) < 0;
    });
    return Value::newList(std::move(l));
  }
  if (name == "indent") {
    const Value *w = a.get(0, "width");
    const Value *first = a.get(1, "first");
    std::string pad(w && w->k == Value::K::Int ? size_t(w->i) : 4, ' ');
    std::string s = pyStr(v), out;
    bool atStart = true, isFirst = true;
    for (char ch : s) {
      if (atStart && ch != '\n' && (!isFirst || (first && truthy(*first))))
        out += pad;
      atStart = false;
      out += ch;
      if (ch == '\n') {
        atStart = true;
        isFirst = false;
      }
    }
    return Value::str(out);
  }
  fail(line, "filter '" + name + "' is not supported");
}

bool applyTest(const std::string &name, const Value &v, const Args &a, int line, Context &c) {
  if (name == "defined") return !v.isUndefined();
  if (name == "undefined") return v.isUndefined();
  if (name == "none") return v.k == Value::K::None;
  if (name == "string") return v.k == Value::K::Str;
  if (name == "number") return v.k == Value::K::Int || v.k == Value::K::Float;
  if (name == "integer") return v.k == Value::K::Int;
  if (name == "float") return v.k == Value::K::Float;
  if (name == "boolean") return v.k == Value::K::Bool;
  if (name == "true") return v.k == Value::K::Bool && v.b;
  if (name == "false") return v.k == Value::K::Bool && !v.b;
  if (name == "mapping") return v.k == Value::K::Dict;
  if (name == "iterable") return v.k == Value::K::List || v.k == Value::K::Dict || v.k == Value::K::Str;
  if (name == "sequence") return v.k == Value::K::List || v.k == Value::K::Str || v.k == Value::K::Dict;
  if (name == "callable") return v.k == Value::K::Macro;
  if (name == "odd" || name == "even") {
    if (v.k != Value::K::Int) fail(line, "'" + name + "' expects an integer");
    return (v.i % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    if (v.k != Value::K::Int || a.pos.empty() || a.pos[0].k != Value::K::Int || a.pos[0].i == 0)
      fail(line, "divisibleby expects integers");
    return v.i % a.pos[0].i == 0;
  }
  if (name == "lower" || name == "upper") {
    if (v.k != Value::K::Str) return false;
    for (unsigned char ch : v.s)
      if (name == "lower" ? std::isupper(ch) : std::islower(ch)) return false;
    return true;
  }
  if (a.pos.empty() && (name == "eq" || name == "equalto" || name == "==" || name == "ne" ||
                        name == "!=" || name == "in" || name == "lt" || name == "gt" ||
                        name == "le" || name == "ge" || name == "sameas"))
    fail(line, "test '" + name + "' needs an argument");
  if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return equal(v, a.pos[0]);
  if (name == "ne" || name == "!=") return !equal(v, a.pos[0]);
  if (name == "in") return contains(a.pos[0], v, line);
  if (name == "lt" || name == "<") return compare(v, a.pos[0], line) < 0;
  if (name == "gt" || name == ">") return compare(v, a.pos[0], line) > 0;
  if (name == "le" || name == "<=") return compare(v, a.pos[0], line) <= 0;
  if (name == "ge" || name == ">=") return compare(v, a.pos[0], line) >= 0;
  fail(line, "test '" + name + "' is not supported");
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

struct TextNode : TemplateNode {
  std::string text;
  Flow exec(Context &c) const override {
    c.out += text;
    return Normal;
  }
};

struct OutputNode : TemplateNode {
  ExprP e;
  Flow exec(Context &c) const override {
    c.out += pyStr(e->eval(c));
    return Normal;
  }
};

struct IfNode : TemplateNode {
  std::vector<std::pair<ExprP, std::vector<NodeP>>> branches;
  std::vector<NodeP> otherwise;
  Flow exec(Context &c) const override {
    for (auto &[cond, body] : branches)
      if (truthy(cond->eval(c)))
        return execBody(body, c);
    return execBody(otherwise, c);
  }
};

void assign(Context &c, const std::vector<std::string> &targets, const Value &v, int line) {
  if (targets.size() == 1) {
    c.set(targets[0], v);
    return;
  }
  List items = iterate(v, line);
  if (items.size() != targets.size())
    fail(line, "cannot unpack " + std::to_string(items.size()) + " values into " +
                   std::to_string(targets.size()) + " names");
  for (size_t i = 0; i < targets.size(); ++i)
    c.set(targets[i], items[i]);
}

struct ForNode : TemplateNode {
  std::vector<std::string> targets;
  ExprP iter, cond;
  std::vector<NodeP> body, otherwise;
  Flow exec(Context &c) const override {
    List items = iterate(iter->eval(c), line);
    if (cond) {
      List kept;
      for (auto &it : items) {
        c.scopes.emplace_back();
        assign(c, targets, it, line);
        bool ok = truthy(cond->eval(c));
        c.scopes.pop_back();
        if (ok)
          kept.push_back(it);
      }
      items.swap(kept);
    }
    if (items.empty())
      return execBody(otherwise, c);
    c.scopes.emplace_back();
    int64_t n = int64_t(items.size());
    for (int64_t i = 0; i < n; ++i) {
      Value loop = Value::newDict();
      loop.dict->set("index", Value::integer(i + 1));
      loop.dict->set("index0", Value::integer(i));
      loop.dict->set("revindex", Value::integer(n - i));
      loop.dict->set("revindex0", Value::integer(n - i - 1));
      loop.dict->set("first", Value::boolean(i == 0));
      loop.dict->set("last", Value::boolean(i == n - 1));
      loop.dict->set("length", Value::integer(n));
      loop.dict->set("previtem", i > 0 ? items[i - 1] : Value::undefined("previtem"));
      loop.dict->set("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("nextitem"));
      c.set("loop", loop);
      assign(c, targets, items[i], line);
      if (execBody(body, c) == Break)
        break;
    }
    c.scopes.pop_back();
    return Normal;
  }
};

struct SetNode : TemplateNode {
  std::vector<std::string> targets;
  std::string attr; // set ns.attr = ...
  ExprP e;
  std::vector<NodeP> block; // {% set x %}...{% endset %}
  Flow exec(Context &c) const override {
    Value v;
    if (e) {
      v = e->eval(c);
    } else {
      std::string saved;
      saved.swap(c.out);
      execBody(block, c);
      v = Value::str(c.out);
      c.out.swap(saved);
    }
    if (!attr.empty()) {
      Value ns = c.lookup(targets[0]);
      if (ns.k != Value::K::Dict)
        fail(line, "'" + targets[0] + "' is not a namespace: cannot set ." + attr);
      ns.dict->set(attr, v);
      return Normal;
    }
    assign(c, targets, v, line);
    return Normal;
  }
};

struct MacroNode : TemplateNode {
  std::shared_ptr<MacroDef> def;
  Flow exec(Context &c) const override {
    Value v;
    v.k = Value::K::Macro;
    v.macro = def;
    c.set(def->name, v);
    return Normal;
  }
};

struct LoopControl : TemplateNode {
  Flow flow;
  Flow exec(Context &) const override { return flow; }
};

struct BlockNode : TemplateNode { // {% generation %}: renders its body
  std::vector<NodeP> body;
  Flow exec(Context &c) const override { return execBody(body, c); }
};

Value callMacro(const MacroDef &m, const Args &a, Context &c, int line) {
  if (++c.depth > 64)
    fail(line, "macro calls nested too deeply");
  std::unordered_map<std::string, Value> scope;
  for (size_t i = 0; i < m.params.size(); ++i) {
    const auto &[pname, def] = m.params[i];
    const Value *given = a.get(i, pname.c_str());
    scope[pname] = given ? *given : def ? def->eval(c) : Value::undefined(pname);
  }
  // The macro sees the template's top-level names and its arguments.
  std::vector<std::unordered_map<std::string, Value>> saved;
  saved.swap(c.scopes);
  c.scopes.push_back(saved.front());
  c.scopes.push_back(std::move(scope));
  std::string out;
  out.swap(c.out);
  try {
    execBody(m.body, c);
  } catch (...) {
    c.scopes.swap(saved);
    c.out.swap(out);
    --c.depth;
    throw;
  }
  out.swap(c.out);
  c.scopes.swap(saved);
  --c.depth;
  return Value::str(out);
}

//===----------------------------------------------------------------------===//
// Lexer
//===----------------------------------------------------------------------===//

struct Token {
  enum T { Name, Str, Int, Float, Op, End } t;
  std::string s;
  int64_t i = 0;
  double f = 0;
};

struct Piece { // a template piece: text or a tag
  enum Kind { Text, Var, Block } kind;
  std::string body;
  int line;
};

std::vector<Piece> splitTemplate(const std::string &src) {
  std::vector<Piece> pieces;
  size_t pos = 0;
  int line = 1;
  bool stripNextAll = false, trimNextNewline = false;
  auto countLines = [&](size_t a, size_t b) {
    for (size_t k = a; k < b; ++k)
      line += src[k] == '\n';
  };
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string::npos && open + 1 < src.size() &&
           src[open + 1] != '{' && src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open != std::string::npos && open + 1 >= src.size())
      open = std::string::npos;
    std::string text = src.substr(pos, open == std::string::npos ? std::string::npos : open - pos);
    int textLine = line;
    countLines(pos, open == std::string::npos ? src.size() : open);
    if (stripNextAll) {
      size_t k = 0;
      while (k < text.size() && isSpaceChar(text[k]))
        ++k;
      text.erase(0, k);
    } else if (trimNextNewline) {
      if (text.compare(0, 1, "\n") == 0)
        text.erase(0, 1);
      else if (text.compare(0, 2, "\r\n") == 0)
        text.erase(0, 2);
    }
    stripNextAll = trimNextNewline = false;
    if (open == std::string::npos) {
      if (!text.empty())
        pieces.push_back({Piece::Text, text, textLine});
      break;
    }
    char kind = src[open + 1];
    bool minusBefore = open + 2 < src.size() && src[open + 2] == '-';
    bool plusBefore = open + 2 < src.size() && src[open + 2] == '+';
    if (minusBefore) {
      while (!text.empty() && isSpaceChar(text.back()))
        text.pop_back();
    } else if (kind != '{' && !plusBefore) {
      // lstrip_blocks: spaces and tabs between the start of the line and
      // a block or comment tag go, when nothing else precedes the tag.
      size_t s = open;
      while (s > pos && (src[s - 1] == ' ' || src[s - 1] == '\t'))
        --s;
      if (s == 0 || src[s - 1] == '\n') {
        size_t n = open - s;
        text.resize(n <= text.size() ? text.size() - n : 0);
      }
    }
    if (!text.empty())
      pieces.push_back({Piece::Text, text, textLine});
    const char *close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t bodyStart = open + 2 + (minusBefore || plusBefore ? 1 : 0);
    size_t end = src.find(close, bodyStart);
    if (end == std::string::npos)
      throw RenderError{line, std::string("unclosed '") + src.substr(open, 2) + "'"};
    bool minusAfter = end > bodyStart && src[end - 1] == '-';
    std::string body = src.substr(bodyStart, end - bodyStart - (minusAfter ? 1 : 0));
    int tagLine = line;
    countLines(open, end + 2);
    if (kind == '{')
      pieces.push_back({Piece::Var, body, tagLine});
    else if (kind == '%')
      pieces.push_back({Piece::Block, body, tagLine});
    pos = end + 2;
    if (minusAfter)
      stripNextAll = true;
    else if (kind != '{')
      trimNextNewline = true; // trim_blocks
    if (pos >= src.size())
      break;
  }
  return pieces;
}

std::vector<Token> lexExpr(const std::string &s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    char ch = s[i];
    if (isSpaceChar(ch)) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_'))
        ++j;
      out.push_back({Token::Name, s.substr(i, j - i)});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      size_t j = i;
      bool isFloat = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_'))
        ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        isFloat = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])))
          ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-'))
          ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          isFloat = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])))
            ++j;
        }
      }
      std::string num;
      for (size_t k = i; k < j; ++k)
        if (s[k] != '_')
          num += s[k];
      Token t{isFloat ? Token::Float : Token::Int, num};
      if (isFloat)
        t.f = std::strtod(num.c_str(), nullptr);
      else {
        errno = 0;
        t.i = std::strtoll(num.c_str(), nullptr, 10);
        if (errno == ERANGE)
          throw RenderError{line, "integer literal " + num.substr(0, 40) +
                                      " is out of range (the template interpreter's "
                                      "integers have 64 bits)"};
      }
      out.push_back(t);
      i = j;
      continue;
    }
    if (ch == '\'' || ch == '"') {
      std::string v;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != ch; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) {
          v += s[j];
          continue;
        }
        char e = s[++j];
        switch (e) {
        case 'n': v += '\n'; break;
        case 't': v += '\t'; break;
        case 'r': v += '\r'; break;
        case '\\': v += '\\'; break;
        case '\'': v += '\''; break;
        case '"': v += '"'; break;
        case '0': v += '\0'; break;
        case 'u': case 'x': {
          size_t n = e == 'u' ? 4 : 2;
          if (j + n >= s.size() + 0 && j + n > s.size() - 1 + 1)
            throw RenderError{line, "bad \\" + std::string(1, e) + " escape in a string"};
          uint32_t cp = std::strtoul(s.substr(j + 1, n).c_str(), nullptr, 16);
          std::string u;
          if (cp < 0x80) u += char(cp);
          else if (cp < 0x800) { u += char(0xC0 | (cp >> 6)); u += char(0x80 | (cp & 0x3F)); }
          else { u += char(0xE0 | (cp >> 12)); u += char(0x80 | ((cp >> 6) & 0x3F)); u += char(0x80 | (cp & 0x3F)); }
          v += u;
          j += n;
          break;
        }
        default: v += '\\'; v += e;
        }
      }
      if (j >= s.size())
        throw RenderError{line, "unterminated string"};
      out.push_back({Token::Str, v});
      i = j + 1;
      continue;
    }
    static const char *ops[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~",
                                "<", ">", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "="};
    bool matched = false;
    for (const char *op : ops) {
      size_t n = std::strlen(op);
      if (s.compare(i, n, op) == 0) {
        out.push_back({Token::Op, op});
        i += n;
        matched = true;
        break;
      }
    }
    if (!matched)
      throw RenderError{line, std::string("unexpected character '") + ch + "'"};
  }
  out.push_back({Token::End, ""});
  return out;
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

// Bounds that keep a hostile template from exhausting the stack (parsing,
// evaluating and freeing a tree recurse over its depth); real templates stay
// far below them.
constexpr size_t kMaxExpressionTokens = 4096;
constexpr int kMaxNesting = 128;

class ExprParser {
public:
  ExprParser(std::vector<Token> toks, int line) : t(std::move(toks)), line(line) {
    if (t.size() > kMaxExpressionTokens)
      throw RenderError{line, "an expression of " + std::to_string(t.size()) +
                                  " tokens; at most " + std::to_string(kMaxExpressionTokens)};
  }
  std::vector<Token> t;
  size_t p = 0;
  int line;
  int depth = 0; // nesting of the expression being parsed

  /// Counts one level of nesting while alive.
  struct Nest {
    ExprParser &parser;
    explicit Nest(ExprParser &parser) : parser(parser) {
      if (++parser.depth > kMaxNesting)
        parser.error("expression nested more than " + std::to_string(kMaxNesting) + " deep");
    }
    ~Nest() { --parser.depth; }
  };

  const Token &peek(size_t k = 0) const { return t[std::min(p + k, t.size() - 1)]; }
  bool isOp(const char *op, size_t k = 0) const { return peek(k).t == Token::Op && peek(k).s == op; }
  bool isName(const char *n, size_t k = 0) const { return peek(k).t == Token::Name && peek(k).s == n; }
  bool atEnd() const { return peek().t == Token::End; }
  void expectOp(const char *op) {
    if (!isOp(op))
      error(std::string("expected '") + op + "'");
    ++p;
  }
  std::string expectName() {
    if (peek().t != Token::Name)
      error("expected a name");
    return t[p++].s;
  }
  [[noreturn]] void error(const std::string &what) const {
    std::string got = atEnd() ? "end of tag" : "'" + peek().s + "'";
    throw RenderError{line, what + ", got " + got};
  }
  template <typename N> std::unique_ptr<N> make() {
    auto n = std::make_unique<N>();
    n->line = line;
    return n;
  }

  ExprP parseExpr(bool withCond = true) {
    ExprP e = parseOr();
    if (withCond && isName("if")) {
      ++p;
      auto c = make<CondExpr>();
      c->then = std::move(e);
      c->cond = parseOr();
      if (isName("else")) {
        ++p;
        c->otherwise = parseExpr();
      }
      return c;
    }
    return e;
  }
  ExprP parseOr() {
    ExprP e = parseAnd();
    while (isName("or")) {
      ++p;
      auto n = make<AndOr>();
      n->isAnd = false;
      n->a = std::move(e);
      n->b = parseAnd();
      e = std::move(n);
    }
    return e;
  }
  ExprP parseAnd() {
    ExprP e = parseNot();
    while (isName("and")) {
      ++p;
      auto n = make<AndOr>();
      n->isAnd = true;
      n->a = std::move(e);
      n->b = parseNot();
      e = std::move(n);
    }
    return e;
  }
  ExprP parseNot() {
    if (isName("not")) {
      Nest nest(*this);
      ++p;
      auto n = make<NotExpr>();
      n->e = parseNot();
      return n;
    }
    return parseCompare();
  }
  ExprP parseCompare() {
    ExprP e = parseMath1();
    for (;;) {
      std::string op;
      if (isOp("==") || isOp("!=") || isOp("<") || isOp(">") || isOp("<=") || isOp(">="))
        op = t[p++].s;
      else if (isName("in"))
        op = "in", ++p;
      else if (isName("not") && isName("in", 1))
        op = "not in", p += 2;
      else
        return e;
      auto n = make<BinExpr>();
      n->op = op;
      n->a = std::move(e);
      n->b = parseMath1();
      e = std::move(n);
    }
  }
  ExprP binary(ExprP e, const std::string &op, ExprP rhs) {
    auto n = make<BinExpr>();
    n->op = op;
    n->a = std::move(e);
    n->b = std::move(rhs);
    return n;
  }
  ExprP parseMath1() {
    ExprP e = parseConcat();
    while (isOp("+") || isOp("-")) {
      std::string op = t[p++].s;
      e = binary(std::move(e), op, parseConcat());
    }
    return e;
  }
  ExprP parseConcat() {
    ExprP e = parseMath2();
    while (isOp("~")) {
      ++p;
      e = binary(std::move(e), "~", parseMath2());
    }
    return e;
  }
  ExprP parseMath2() {
    ExprP e = parsePow();
    while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
      std::string op = t[p++].s;
      e = binary(std::move(e), op, parsePow());
    }
    return e;
  }
  ExprP parsePow() {
    ExprP e = parseUnary();
    while (isOp("**")) {
      ++p;
      e = binary(std::move(e), "**", parseUnary());
    }
    return e;
  }
  ExprP parseUnary(bool withFilter = true) {
    Nest nest(*this); // parentheses, lists and dicts come through here too
    if (isOp("-") || isOp("+")) {
      bool minus = isOp("-");
      ++p;
      auto n = make<NegExpr>();
      n->minus = minus;
      n->e = parseUnary(false);
      ExprP e = std::move(n);
      return withFilter ? parseFilters(std::move(e)) : std::move(e);
    }
    ExprP e = parsePostfix(parsePrimary());
    return withFilter ? parseFilters(std::move(e)) : std::move(e);
  }
  ArgExprs parseArgs() { // after '('
    ArgExprs a;
    while (!isOp(")")) {
      if (peek().t == Token::Name && isOp("=", 1)) {
        std::string k = t[p].s;
        p += 2;
        a.kw.emplace_back(k, parseExpr());
      } else {
        a.pos.push_back(parseExpr());
      }
      if (!isOp(","))
        break;
      ++p;
    }
    expectOp(")");
    return a;
  }
  ExprP parseFilters(ExprP e) {
    for (;;) {
      if (isOp("|")) {
        ++p;
        auto f = make<FilterExpr>();
        f->obj = std::move(e);
        f->name = expectName();
        if (isOp("(")) {
          ++p;
          f->args = parseArgs();
        }
        e = std::move(f);
      } else if (isName("is")) {
        ++p;
        auto n = make<TestExpr>();
        if (isName("not")) {
          ++p;
          n->negated = true;
        }
        n->obj = std::move(e);
        if (peek().t == Token::Name)
          n->name = t[p++].s;
        else if (isOp("==") || isOp("!=") || isOp("<") || isOp(">") || isOp("<=") || isOp(">="))
          n->name = t[p++].s;
        else
          error("expected a test name after 'is'");
        if (isOp("(")) {
          ++p;
          n->args = parseArgs();
        } else if (peek().t == Token::Str || peek().t == Token::Int || peek().t == Token::Float ||
                   (peek().t == Token::Name && !isName("and") && !isName("or") && !isName("if") &&
                    !isName("else") && !isName("is") && !isName("in") && !isName("not"))) {
          n->args.pos.push_back(parsePostfix(parsePrimary()));
        }
        e = std::move(n);
      } else {
        return e;
      }
    }
  }
  ExprP parsePrimary() {
    const Token &tok = peek();
    if (tok.t == Token::Str) {
      auto l = make<Literal>();
      std::string s = t[p++].s;
      while (peek().t == Token::Str) // adjacent literals concatenate
        s += t[p++].s;
      l->v = Value::str(s);
      return l;
    }
    if (tok.t == Token::Int || tok.t == Token::Float) {
      auto l = make<Literal>();
      l->v = tok.t == Token::Int ? Value::integer(tok.i) : Value::real(tok.f);
      ++p;
      return l;
    }
    if (tok.t == Token::Name) {
      std::string n = t[p++].s;
      if (n == "true" || n == "True" || n == "false" || n == "False") {
        auto l = make<Literal>();
        l->v = Value::boolean(n[0] == 't' || n[0] == 'T');
        return l;
      }
      if (n == "none" || n == "None") {
        auto l = make<Literal>();
        l->v = Value::none();
        return l;
      }
      auto name = make<Name>();
      name->name = n;
      return name;
    }
    if (isOp("(")) {
      ++p;
      if (isOp(")")) {
        ++p;
        auto l = make<ListExpr>();
        return l;
      }
      ExprP e = parseExpr();
      if (isOp(",")) { // a tuple: a list here
        auto l = make<ListExpr>();
        l->items.push_back(std::move(e));
        while (isOp(",")) {
          ++p;
          if (isOp(")"))
            break;
          l->items.push_back(parseExpr());
        }
        expectOp(")");
        return l;
      }
      expectOp(")");
      return e;
    }
    if (isOp("[")) {
      ++p;
      auto l = make<ListExpr>();
      while (!isOp("]")) {
        l->items.push_back(parseExpr());
        if (!isOp(","))
          break;
        ++p;
      }
      expectOp("]");
      return l;
    }
    if (isOp("{")) {
      ++p;
      auto d = make<DictExpr>();
      while (!isOp("}")) {
        ExprP k = parseExpr();
        expectOp(":");
        d->items.emplace_back(std::move(k), parseExpr());
        if (!isOp(","))
          break;
        ++p;
      }
      expectOp("}");
      return d;
    }
    error("expected an expression");
  }
  ExprP parsePostfix(ExprP e) {
    for (;;) {
      if (isOp(".")) {
        ++p;
        auto g = make<GetAttr>();
        g->obj = std::move(e);
        if (peek().t == Token::Int) {
          auto gi = make<GetItem>();
          gi->obj = std::move(g->obj);
          auto l = make<Literal>();
          l->v = Value::integer(t[p++].i);
          gi->key = std::move(l);
          e = std::move(gi);
          continue;
        }
        g->name = expectName();
        e = std::move(g);
      } else if (isOp("[")) {
        ++p;
        ExprP a, b, c;
        bool slice = false;
        if (!isOp(":"))
          a = parseExpr();
        if (isOp(":")) {
          slice = true;
          ++p;
          if (!isOp("]") && !isOp(":"))
            b = parseExpr();
          if (isOp(":")) {
            ++p;
            if (!isOp("]"))
              c = parseExpr();
          }
        }
        expectOp("]");
        if (slice) {
          auto s = make<SliceExpr>();
          s->obj = std::move(e);
          s->start = std::move(a);
          s->stop = std::move(b);
          s->step = std::move(c);
          e = std::move(s);
        } else {
          auto g = make<GetItem>();
          g->obj = std::move(e);
          g->key = std::move(a);
          e = std::move(g);
        }
      } else if (isOp("(")) {
        ++p;
        auto c = make<Call>();
        c->callee = std::move(e);
        c->args = parseArgs();
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
};

class TemplateParser {
public:
  std::vector<Piece> pieces;
  size_t k = 0;
  int nesting = 0; // blocks open around the body being parsed

  /// Parses nodes until a block tag whose first word is in `stops`.
  std::vector<NodeP> parseBody(const std::vector<std::string> &stops, std::string *stoppedAt,
                               std::unique_ptr<ExprParser> *stopParser) {
    struct Nest {
      int &n;
      Nest(int &n, int line) : n(n) {
        if (++n > kMaxNesting)
          throw RenderError{line, "blocks nested more than " + std::to_string(kMaxNesting) +
                                      " deep"};
      }
      ~Nest() { --n; }
    } nest(nesting, k < pieces.size() ? pieces[k].line : 0);
    std::vector<NodeP> body;
    while (k < pieces.size()) {
      Piece &pc = pieces[k];
      if (pc.kind == Piece::Text) {
        auto n = std::make_unique<TextNode>();
        n->text = pc.body;
        n->line = pc.line;
        body.push_back(std::move(n));
        ++k;
        continue;
      }
      auto ep = std::make_unique<ExprParser>(lexExpr(pc.body, pc.line), pc.line);
      if (pc.kind == Piece::Var) {
        ++k;
        auto n = std::make_unique<OutputNode>();
        n->line = pc.line;
        n->e = ep->parseExpr();
        if (!ep->atEnd())
          ep->error("expected '}}'");
        body.push_back(std::move(n));
        continue;
      }
      std::string word = ep->expectName();
      if (std::find(stops.begin(), stops.end(), word) != stops.end()) {
        *stoppedAt = word;
        *stopParser = std::move(ep);
        ++k;
        return body;
      }
      ++k;
      body.push_back(parseStatement(word, *ep, pc.line));
    }
    if (!stops.empty())
      throw RenderError{pieces.empty() ? 1 : pieces.back().line,
                        "missing {% " + stops.back() + " %} (end of template reached)"};
    return body;
  }

  std::vector<std::string> parseTargets(ExprParser &ep) {
    std::vector<std::string> names{ep.expectName()};
    while (ep.isOp(",")) {
      ++ep.p;
      names.push_back(ep.expectName());
    }
    return names;
  }

  void expectEnd(ExprParser &ep) {
    if (!ep.atEnd())
      ep.error("expected '%}'");
  }

  NodeP parseStatement(const std::string &word, ExprParser &ep, int line) {
    std::string stop;
    std::unique_ptr<ExprParser> sp;
    if (word == "if") {
      auto n = std::make_unique<IfNode>();
      n->line = line;
      ExprP cond = ep.parseExpr();
      expectEnd(ep);
      for (;;) {
        auto body = parseBody({"elif", "else", "endif"}, &stop, &sp);
        n->branches.emplace_back(std::move(cond), std::move(body));
        if (stop == "elif") {
          cond = sp->parseExpr();
          expectEnd(*sp);
          continue;
        }
        if (stop == "else") {
          expectEnd(*sp);
          n->otherwise = parseBody({"endif"}, &stop, &sp);
        }
        expectEnd(*sp);
        return n;
      }
    }
    if (word == "for") {
      auto n = std::make_unique<ForNode>();
      n->line = line;
      n->targets = parseTargets(ep);
      if (!ep.isName("in"))
        ep.error("expected 'in'");
      ++ep.p;
      n->iter = ep.parseExpr(false);
      if (ep.isName("if")) {
        ++ep.p;
        n->cond = ep.parseExpr(false);
      }
      expectEnd(ep);
      n->body = parseBody({"else", "endfor"}, &stop, &sp);
      if (stop == "else") {
        expectEnd(*sp);
        n->otherwise = parseBody({"endfor"}, &stop, &sp);
      }
      expectEnd(*sp);
      return n;
    }
    if (word == "set") {
      auto n = std::make_unique<SetNode>();
      n->line = line;
      if (ep.peek().t == Token::Name && ep.isOp(".", 1)) {
        n->targets = {ep.expectName()};
        ++ep.p;
        n->attr = ep.expectName();
      } else {
        n->targets = parseTargets(ep);
      }
      if (ep.isOp("=")) {
        ++ep.p;
        n->e = ep.parseExpr();
        if (ep.isOp(",")) { // set a = b, c
          auto l = std::make_unique<ListExpr>();
          l->line = line;
          l->items.push_back(std::move(n->e));
          while (ep.isOp(",")) {
            ++ep.p;
            l->items.push_back(ep.parseExpr());
          }
          n->e = std::move(l);
        }
        expectEnd(ep);
        return n;
      }
      expectEnd(ep);
      n->block = parseBody({"endset"}, &stop, &sp);
      expectEnd(*sp);
      return n;
    }
    if (word == "macro") {
      auto def = std::make_shared<MacroDef>();
      def->name = ep.expectName();
      ep.expectOp("(");
      while (!ep.isOp(")")) {
        std::string pname = ep.expectName();
        ExprP d;
        if (ep.isOp("=")) {
          ++ep.p;
          d = ep.parseExpr();
        }
        def->params.emplace_back(pname, std::move(d));
        if (!ep.isOp(","))
          break;
        ++ep.p;
      }
      ep.expectOp(")");
      expectEnd(ep);
      def->body = parseBody({"endmacro"}, &stop, &sp);
      auto n = std::make_unique<MacroNode>();
      n->line = line;
      n->def = def;
      return n;
    }
    if (word == "break" || word == "continue") {
      expectEnd(ep);
      auto n = std::make_unique<LoopControl>();
      n->line = line;
      n->flow = word == "break" ? TemplateNode::Break : TemplateNode::Continue;
      return n;
    }
    if (word == "generation") {
      expectEnd(ep);
      auto n = std::make_unique<BlockNode>();
      n->line = line;
      n->body = parseBody({"endgeneration"}, &stop, &sp);
      return n;
    }
    throw RenderError{line, "unknown or unexpected tag '" + word + "'"};
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// ChatTemplate
//===----------------------------------------------------------------------===//

namespace {
struct RootNode : TemplateNode {
  std::vector<NodeP> body;
  Flow exec(Context &c) const override {
    execBody(body, c);
    return Normal;
  }
};
} // namespace

ChatTemplate::ChatTemplate() = default;
ChatTemplate::~ChatTemplate() = default;

std::unique_ptr<ChatTemplate> ChatTemplate::parse(const std::string &source,
                                                  const std::string &name) {
  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
  t->name = name;
  try {
    TemplateParser parser;
    parser.pieces = splitTemplate(source);
    std::string stop;
    std::unique_ptr<ExprParser> sp;
    auto root = std::make_unique<RootNode>();
    root->body = parser.parseBody({}, &stop, &sp);
    t->root = std::move(root);
  } catch (const RenderError &e) {
    throw TextError(name + ": line " + std::to_string(e.line) + ": " + e.message);
  }
  return t;
}

std::string ChatTemplate::render(std::string_view variablesJson) const {
  ojson vars;
  try {
    vars = ojson::parse(variablesJson.begin(), variablesJson.end());
  } catch (const ojson::parse_error &e) {
    throw TextError(name + ": the variables are not valid JSON: " + e.what());
  }
  if (!vars.is_object())
    throw TextError(name + ": the variables must be a JSON object");
  Context c;
  c.scopes.emplace_back();
  for (auto it = vars.begin(); it != vars.end(); ++it)
    c.scopes.back()[it.key()] = fromJson(it.value());
  try {
    root->exec(c);
  } catch (const RenderError &e) {
    throw TextError(name + ": line " + std::to_string(e.line) + ": " + e.message);
  }
  return c.out;
}

std::string withSpecialTokens(std::string_view variablesJson, const std::string &name,
                              const ChatConfig &config) {
  ojson vars;
  try {
    vars = ojson::parse(variablesJson.begin(), variablesJson.end());
  } catch (const ojson::parse_error &e) {
    throw TextError(name + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
  }
  if (!vars.is_object())
    throw TextError(name + ": expected a JSON object of template variables");
  if (!vars.contains("bos_token"))
    vars["bos_token"] = config.bosToken;
  if (!vars.contains("eos_token"))
    vars["eos_token"] = config.eosToken;
  return vars.dump();
}

ChatConfig loadChatConfig(const std::string &dir) {
  ChatConfig cfg;
  std::string base = dir + (dir.empty() || dir.back() == '/' ? "" : "/");
  std::string file = base + "tokenizer_config.json";
  auto readFile = [](const std::string &path, std::string &out) {
    std::ifstream in(path, std::ios::binary);
    if (!in)
      return false;
    std::ostringstream ss;
    ss << in.rdbuf();
    out = ss.str();
    return true;
  };
  std::string text;
  if (readFile(file, text)) {
    ojson j;
    try {
      j = ojson::parse(text);
    } catch (const ojson::parse_error &e) {
      throw TextError(file + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
    }
    auto tokenText = [&](const char *field) -> std::string {
      auto it = j.find(field);
      if (it == j.end() || it->is_null())
        return "";
      if (it->is_string())
        return it->get<std::string>();
      if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
        return (*it)["content"].get<std::string>();
      throw TextError(file + ": " + field + ": expected a string or {\"content\": ...}");
    };
    cfg.bosToken = tokenText("bos_token");
    cfg.eosToken = tokenText("eos_token");
    auto it = j.find("chat_template");
    if (it != j.end() && !it->is_null()) {
      if (it->is_string()) {
        cfg.source = it->get<std::string>();
      } else if (it->is_array()) {
        for (auto &e : *it)
          if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
              e["template"].is_string())
            cfg.source = e["template"].get<std::string>();
        if (cfg.source.empty())
          throw TextError(file + ": chat_template: a list without a \"default\" template");
      } else {
        throw TextError(file + ": chat_template: expected a string or a list of templates");
      }
      cfg.origin = file + ": chat_template";
    }
  }
  std::string jinja = base + "chat_template.jinja";
  if (cfg.source.empty() && readFile(jinja, cfg.source))
    cfg.origin = jinja;
  if (cfg.source.empty())
    throw TextError(file + ": chat_template: missing (and no chat_template.jinja in " + dir + ")");
  return cfg;
}

} // namespace spark::text
