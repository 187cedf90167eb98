// The Kueue YAML parser's entry points: a file is split into documents, each document is read
// by yaml-cpp behind a guard against its known hangs, and each object is parsed by a
// DocumentParser (ops/kueue_yaml/parser.h; one file per Kueue kind in ops/kueue_yaml/).

#include "ops/kueue_yaml/kueue_yaml.h"

#include <sstream>
#include <utility>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "ops/kueue_yaml/parser.h"

namespace admission::ops {

namespace {

using kueue_yaml_internal::DocumentParser;
using kueue_yaml_internal::Mode;
using kueue_yaml_internal::RawDocument;


// Splits a YAML stream at document markers, so that each document's own text is known (it
// seeds generated names) and line numbers can be made absolute. A line starting with "---" or
// "..." followed by a space or the end of the line is always a marker in YAML: no scalar may
// contain one. Comments and directives before a document's "---" stay with that document.
std::vector<RawDocument> SplitDocuments(std::string_view text) {
  std::vector<RawDocument> documents;
  size_t chunk_begin = 0;
  size_t chunk_line = 1;
  bool chunk_has_content = false;
  auto close_chunk = [&](size_t end) {
    if (end > chunk_begin) {
      documents.push_back({text.substr(chunk_begin, end - chunk_begin), chunk_line});
    }
  };
  size_t line = 1;
  for (size_t pos = 0; pos < text.size(); ++line) {
    const size_t eol = text.find('\n', pos);
    const size_t next = eol == std::string_view::npos ? text.size() : eol + 1;
    std::string_view l =
        text.substr(pos, (eol == std::string_view::npos ? text.size() : eol) - pos);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    auto is_marker = [&](std::string_view marker) {
      return l.starts_with(marker) && (l.size() == 3 || l[3] == ' ' || l[3] == '\t');
    };
    auto has_content = [](std::string_view rest) {
      const size_t first = rest.find_first_not_of(" \t");
      return first != std::string_view::npos && rest[first] != '#';
    };
    if (is_marker("---")) {
      if (chunk_has_content) {
        close_chunk(pos);
        chunk_begin = pos;
        chunk_line = line;
      }
      chunk_has_content = has_content(l.substr(3));
    } else if (is_marker("...")) {
      close_chunk(pos);
      chunk_begin = next;
      chunk_line = line + 1;
      chunk_has_content = false;
    } else if (l.starts_with("%")) {
      if (chunk_has_content) {
        close_chunk(pos);
        chunk_begin = pos;
        chunk_line = line;
        chunk_has_content = false;
      }
    } else if (has_content(l)) {
      chunk_has_content = true;
    }
    pos = next;
  }
  close_chunk(text.size());
  return documents;
}

// Counts the documents of a YAML stream without building them.
class DocumentCounter final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { last_line_ = mark.line; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
  int last_line() const { return last_line_; }

 private:
  int last_line_ = 0;
};

// yaml-cpp 0.7 (Debian 12's) never returns from LoadAll on some malformed input, e.g. a stray
// ',' (found by tests/fuzz/yaml_fuzz.cc; jbeder/yaml-cpp#1040, fixed upstream after 0.8.0 by
// #1318 and #1319): its parser keeps reporting an empty document without consuming a token,
// and LoadAll collects them until memory runs out. So each piece is first parsed by a handler
// that builds nothing, and refused once it reports more documents than the text could hold
// (every document but the last takes at least one byte). Returns the line (0-based) where the
// parser got stuck, or -1 when it reaches the end. Throws what the parser throws.
int StuckParserLine(const std::string& text) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  DocumentCounter counter;
  const size_t documents_max = text.size() + 1;
  for (size_t documents = 0; parser.HandleNextDocument(counter);) {
    if (++documents > documents_max) return counter.last_line();
  }
  return -1;
}

Result<std::vector<ParsedObject>> ParseYaml(std::string_view text, Mode mode,
                                            const SubmitContext* ctx,
                                            const ParseOptions& options = {}) {
  if (text.size() > kYamlBytesMax) {
    return Status(Code::kInvalidArgument, "the file is " + std::to_string(text.size()) +
                                              " bytes; at most " + std::to_string(kYamlBytesMax) +
                                              " are allowed");
  }
  std::vector<ParsedObject> out;
  size_t document_number = 0;
  for (const RawDocument& raw : SplitDocuments(text)) {
    std::vector<YAML::Node> nodes;
    try {
      const std::string raw_text(raw.text);
      if (const int stuck = StuckParserLine(raw_text); stuck >= 0) {
        DocumentParser parser(mode, ctx, document_number + 1, raw, &out, &options);
        parser.FailAtLine(static_cast<size_t>(stuck),
                          "not valid YAML: the parser cannot get past this line");
        return Status(Code::kInvalidArgument, parser.error().ToString());
      }
      nodes = YAML::LoadAll(raw_text);
    } catch (const YAML::Exception& e) {
      DocumentParser parser(mode, ctx, document_number + 1, raw, &out, &options);
      parser.FailAtLine(e.mark.is_null() ? 0 : static_cast<size_t>(e.mark.line),
                        "not valid YAML: " + e.msg);
      return Status(Code::kInvalidArgument, parser.error().ToString());
    }
    for (const YAML::Node& node : nodes) {
      if (node.IsNull()) continue;  // an empty document, e.g. after a trailing `---`
      ++document_number;
      DocumentParser parser(mode, ctx, document_number, raw, &out, &options);
      bool ok = false;
      try {
        ok = parser.ParseObject(node, "", true);
      } catch (const YAML::Exception& e) {
        parser.FailAtLine(e.mark.is_null() ? 0 : static_cast<size_t>(e.mark.line),
                          "unreadable YAML: " + e.msg);
      }
      if (!ok) return Status(Code::kInvalidArgument, parser.error().ToString());
    }
  }
  return out;
}

}  // namespace

std::string YamlError::ToString() const {
  std::string where = "document " + std::to_string(document_number);
  std::string detail;
  if (!kind.empty()) detail = kind + (name.empty() ? "" : " " + name);
  if (line != 0) {
    detail += (detail.empty() ? "" : ", ") + std::string("line ") + std::to_string(line);
  }
  if (!detail.empty()) where += " (" + detail + ")";
  return where + ": " + (field_path.empty() ? "" : field_path + ": ") + reason;
}

Result<std::vector<ParsedObject>> ParseApplyYaml(std::string_view text,
                                                  const ParseOptions& options) {
  return ParseYaml(text, Mode::kApply, nullptr, options);
}

Result<std::vector<ParsedObject>> ParseSubmitYaml(std::string_view text, const SubmitContext& ctx,
                                                   const ParseOptions& options) {
  return ParseYaml(text, Mode::kSubmit, &ctx, options);
}

Result<std::vector<ParsedObject>> ParseImportYaml(std::string_view text, const SubmitContext& ctx,
                                                   const ParseOptions& options) {
  return ParseYaml(text, Mode::kImport, &ctx, options);
}

Result<std::vector<ParsedObject>> ParseDeleteYaml(std::string_view text) {
  return ParseYaml(text, Mode::kDelete, nullptr);
}

std::string WorkloadKey(std::string_view verb, const ParsedObject& object) {
  ADM_CHECK(verb == "submit" || verb == "import", "no workload key for '%.*s'",
            static_cast<int>(verb.size()), verb.data());
  ADM_CHECK(!object.uid.empty(), "workload %s/%s has no uid", object.ns.c_str(),
            object.name.c_str());
  std::string key(verb);
  key.append("/").append(object.ns).append("/").append(object.name).append("/").append(object.uid);
  return key;
}

std::vector<std::string> KeyedWorkloadEvents(std::string_view verb,
                                             const std::vector<ParsedObject>& objects) {
  std::vector<std::string> events;
  events.reserve(objects.size());
  for (const ParsedObject& o : objects) {
    auto decoded = schema::DecodeEvent(o.event);
    ADM_CHECK(decoded.ok(), "the parser's own event does not decode: %s",
              decoded.status().ToString().c_str());
    capnp::MallocMessageBuilder message;
    message.setRoot(decoded->root());
    message.getRoot<schema::Event>().setIdempotencyKey(WorkloadKey(verb, o));
    events.push_back(schema::EncodeEvent(message));
  }
  return events;
}

}  // namespace admission::ops
