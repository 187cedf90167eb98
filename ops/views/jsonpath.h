#pragma once
// kubectl's -o jsonpath templates, the part people use (hand-written: no C++ library of
// kubectl's dialect is packaged): literal text, `{.a.b}`, `{.items[0]}`, `{.items[*].x}`,
// `{['key.with.dots']}`, `{range .items[*]}...{end}`, `{"\n"}` and `{"\t"}`. Several results
// print space-separated, as kubectl prints them; a string prints without quotes, anything else
// as compact JSON.

#include <string>

#include "ops/views/render.h"
#include "schema/result.h"

namespace admission::ops {

// kInvalidArgument naming what does not parse.
Result<std::string> JsonPath(const std::string& tmpl, const Json& data);

}  // namespace admission::ops
