#include "ops/views/jsonpath.h"

#include <vector>

namespace admission::ops {

namespace {

// One step of a path: a field, an index, or every element/value.
struct Step {
  enum class Kind { kField, kIndex, kAll } kind = Kind::kField;
  std::string field;
  long index = 0;
};

Result<std::vector<Step>> ParsePath(const std::string& expr) {
  std::vector<Step> steps;
  size_t i = 0;
  auto bad = [&expr](const std::string& why) -> Status {
    return Status(Code::kInvalidArgument, "jsonpath '{" + expr + "}': " + why);
  };
  if (i < expr.size() && expr[i] == '.' && expr.size() == 1) return steps;  // {.}: the root
  while (i < expr.size()) {
    if (expr[i] == '.') {
      ++i;
      size_t end = expr.find_first_of(".[", i);
      if (end == std::string::npos) end = expr.size();
      if (end == i) return bad("an empty field name at position " + std::to_string(i));
      Step s;
      s.field = expr.substr(i, end - i);
      if (s.field == "*") s.kind = Step::Kind::kAll;
      steps.push_back(s);
      i = end;
    } else if (expr[i] == '[') {
      const size_t close = expr.find(']', i);
      if (close == std::string::npos) return bad("a '[' without ']'");
      std::string inside = expr.substr(i + 1, close - i - 1);
      Step s;
      if (inside == "*") {
        s.kind = Step::Kind::kAll;
      } else if (inside.size() >= 2 && (inside.front() == '\'' || inside.front() == '"') &&
                 inside.back() == inside.front()) {
        s.field = inside.substr(1, inside.size() - 2);
      } else {
        try {
          size_t used = 0;
          s.index = std::stol(inside, &used);
          if (used != inside.size()) return bad("'" + inside + "' is not an index");
        } catch (const std::exception&) {
          return bad("'" + inside + "' is not an index, * or a quoted key");
        }
        s.kind = Step::Kind::kIndex;
      }
      steps.push_back(s);
      i = close + 1;
    } else {
      return bad("expected '.' or '[' at position " + std::to_string(i));
    }
  }
  return steps;
}

void Evaluate(const Json& node, const std::vector<Step>& steps, size_t at,
              std::vector<const Json*>* out) {
  if (at == steps.size()) {
    out->push_back(&node);
    return;
  }
  const Step& s = steps[at];
  switch (s.kind) {
    case Step::Kind::kField:
      if (node.is_object() && node.contains(s.field)) Evaluate(node[s.field], steps, at + 1, out);
      return;
    case Step::Kind::kIndex:
      if (node.is_array()) {
        const long n = static_cast<long>(node.size());
        const long i = s.index < 0 ? n + s.index : s.index;
        if (i >= 0 && i < n) Evaluate(node[static_cast<size_t>(i)], steps, at + 1, out);
      }
      return;
    case Step::Kind::kAll:
      if (node.is_array() || node.is_object()) {
        for (const Json& v : node) Evaluate(v, steps, at + 1, out);
      }
      return;
  }
}

std::string Print(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// Expands tmpl[from, to) against `data`; `i` moves past what was read.
Result<std::string> Expand(const std::string& tmpl, size_t* i, const Json& data, bool in_range);

Result<std::string> ExpandExpression(const std::string& tmpl, size_t* i, const std::string& expr,
                                     const Json& data) {
  if (expr.size() >= 2 && expr.front() == '"' && expr.back() == '"') {
    std::string lit, body = expr.substr(1, expr.size() - 2);
    for (size_t k = 0; k < body.size(); ++k) {
      if (body[k] == '\\' && k + 1 < body.size()) {
        const char c = body[++k];
        lit += c == 'n' ? '\n' : c == 't' ? '\t' : c;
      } else {
        lit += body[k];
      }
    }
    return lit;
  }
  if (expr.rfind("range ", 0) == 0) {
    auto steps = ParsePath(expr.substr(6));
    if (!steps.ok()) return steps.status();
    std::vector<const Json*> items;
    Evaluate(data, *steps, 0, &items);
    const size_t body_start = *i;
    std::string out;
    size_t after = body_start;
    for (const Json* item : items) {
      size_t j = body_start;
      auto body = Expand(tmpl, &j, *item, true);
      if (!body.ok()) return body.status();
      out += *body;
      after = j;
    }
    if (items.empty()) {  // skip the body
      size_t j = body_start;
      auto body = Expand(tmpl, &j, Json(), true);
      if (!body.ok()) return body.status();
      after = j;
    }
    *i = after;
    return out;
  }
  auto steps = ParsePath(expr);
  if (!steps.ok()) return steps.status();
  std::vector<const Json*> values;
  Evaluate(data, *steps, 0, &values);
  std::string out;
  for (size_t k = 0; k < values.size(); ++k) out += (k ? " " : "") + Print(*values[k]);
  return out;
}

Result<std::string> Expand(const std::string& tmpl, size_t* i, const Json& data, bool in_range) {
  std::string out;
  while (*i < tmpl.size()) {
    if (tmpl[*i] != '{') {
      out += tmpl[(*i)++];
      continue;
    }
    const size_t close = tmpl.find('}', *i);
    if (close == std::string::npos) {
      return Status(Code::kInvalidArgument, "jsonpath: a '{' without '}' at position " +
                                                std::to_string(*i));
    }
    const std::string expr = tmpl.substr(*i + 1, close - *i - 1);
    *i = close + 1;
    if (expr == "end") {
      if (!in_range) return Status(Code::kInvalidArgument, "jsonpath: {end} without {range}");
      return out;
    }
    auto piece = ExpandExpression(tmpl, i, expr, data);
    if (!piece.ok()) return piece.status();
    out += *piece;
  }
  if (in_range) return Status(Code::kInvalidArgument, "jsonpath: {range} without {end}");
  return out;
}

}  // namespace

Result<std::string> JsonPath(const std::string& tmpl, const Json& data) {
  size_t i = 0;
  return Expand(tmpl, &i, data, false);
}

}  // namespace admission::ops
