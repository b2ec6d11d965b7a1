// The brief form of a record: one table row per record type says where its lines are.
#include "brief.hpp"

#include <algorithm>
#include <array>
#include <string_view>

namespace kwiki::detail {
namespace {

using ordered_json = nlohmann::ordered_json;

// Where a record type keeps its brief lines. Each entry is a JSON pointer into the served
// payload, or a template of pointers in braces; the first that yields text wins.
struct BriefRow {
  std::string_view type;
  std::array<std::string_view, 3> title;
  std::array<std::string_view, 3> action;
  std::string_view details;  ///< the payload member whose members are the detail fields ("" = the payload)
};

constexpr BriefRow kBriefRows[] = {
    {"technique-card", {"/goal", "/title"}, {"/technique", "/what"}, ""},
    {"strategy", {"/goal", "/title"}, {"/technique", "/what", "/lesson"}, ""},
    {"reference-kernel", {"/goal", "/title"}, {"/technique", "/what"}, ""},
    {"dispatch-rule", {"/goal"}, {"/rule"}, ""},
    {"numerics-rule", {"/goal"}, {"/rule"}, ""},
    {"anti-strategy", {"/goal"}, {"/lesson", "/verdict"}, ""},
    {"symptom-card", {"/goal"}, {"/candidate_techniques/0/technique", "/likely_causes/0"}, ""},
    {"doc", {"/title", "/goal"}, {"/summary", "/goal"}, ""},
    {"arch-feature", {"/facts/what"}, {"/facts/programming_model", "/facts/why_it_matters"}, "facts"},
    {"instruction", {"/facts/semantics"}, {"/facts/syntax/0", "/facts/accelerates"}, "facts"},
    {"spec-sheet", {"/facts/summary"}, {}, "facts"},
    {"measured-ceiling", {"/facts/summary"}, {"{/facts/value} {/facts/unit} ({/facts/statistic})", "/facts/usage_notes/0"}, "facts"},
};
constexpr std::size_t kBriefRowCount = sizeof kBriefRows / sizeof kBriefRows[0];
static_assert(kBriefRowCount == 12, "a record type added to the schemas needs its brief row");

// A type no row names (a newer schema): the common spellings.
constexpr BriefRow kFallbackRow = {"", {"/goal", "/title", "/facts/summary"}, {"/technique", "/rule", "/lesson"}, ""};

// Where records keep their first source.
constexpr std::array<std::string_view, 4> kCitePointers = {"/sources/0/url", "/sources/0/ref", "/provenance/sources/0/url",
                                                           "/provenance/sources/0/ref"};

const BriefRow& row_of(std::string_view type) {
  for (const auto& row : kBriefRows)
    if (row.type == type) return row;
  return kFallbackRow;
}

const ordered_json* at_pointer(const ordered_json& doc, std::string_view pointer) {
  const ordered_json* node = &doc;
  std::size_t start = 1;
  while (start <= pointer.size() && start > 0) {
    const std::size_t end = std::min(pointer.find('/', start), pointer.size());
    const std::string token(pointer.substr(start, end - start));
    if (node->is_object()) {
      const auto it = node->find(token);
      if (it == node->end()) return nullptr;
      node = &*it;
    } else if (node->is_array()) {
      if (token.empty() || token.find_first_not_of("0123456789") != std::string::npos) return nullptr;
      const std::size_t index = std::stoul(token);
      if (index >= node->size()) return nullptr;
      node = &(*node)[index];
    } else {
      return nullptr;
    }
    start = end + 1;
  }
  return node;
}

// The text a pointer names: a string, or a number as JSON writes it.
std::string text_at(const ordered_json& doc, std::string_view pointer) {
  const ordered_json* v = at_pointer(doc, pointer);
  if (!v) return {};
  if (v->is_string()) return v->get<std::string>();
  if (v->is_number()) return v->dump();
  return {};
}

// A pointer, or a template "{/a} {/b} ({/c})" whose every pointer must yield text.
std::string fill(const ordered_json& doc, std::string_view entry) {
  if (entry.empty()) return {};
  if (entry.front() != '{') return text_at(doc, entry);
  std::string out;
  for (std::size_t i = 0; i < entry.size();) {
    if (entry[i] != '{') {
      out += entry[i++];
      continue;
    }
    const std::size_t close = entry.find('}', i);
    const std::string value = text_at(doc, entry.substr(i + 1, close - i - 1));
    if (value.empty()) return {};
    out += value;
    i = close + 1;
  }
  return out;
}

// The first entry that yields text, and the top-level member it came from.
std::pair<std::string, std::string_view> first_text(const ordered_json& doc, const std::array<std::string_view, 3>& entries) {
  for (const auto entry : entries) {
    std::string text = fill(doc, entry);
    if (text.empty()) continue;
    return {std::move(text), entry};
  }
  return {};
}

// The member of `container` an entry reads ("/facts/what" in "facts" -> "what").
std::string_view member_of(std::string_view entry, std::string_view container) {
  if (entry.empty() || entry.front() != '/') return {};
  std::string_view rest = entry.substr(1);
  if (!container.empty()) {
    if (!rest.starts_with(container) || rest.size() <= container.size() || rest[container.size()] != '/') return {};
    rest = rest.substr(container.size() + 1);
  }
  return rest.substr(0, rest.find('/'));
}

bool sentence_end(std::string_view text, std::size_t i) {
  return (text[i] == '.' || text[i] == ';' || text[i] == '!' || text[i] == '?') && (i + 1 == text.size() || text[i + 1] == ' ');
}

}  // namespace

std::string cut_text(std::string_view text, std::size_t max_bytes) {
  std::string flat;
  flat.reserve(std::min(text.size(), max_bytes * 2));
  for (char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space && (flat.empty() || flat.back() == ' ')) continue;
    flat += space ? ' ' : c;
    if (flat.size() > max_bytes * 2) break;  // enough to choose a cut from
  }
  while (!flat.empty() && flat.back() == ' ') flat.pop_back();
  if (flat.size() <= max_bytes) return flat;
  // Whole sentences, when the first one fits.
  std::size_t last_sentence = 0;
  for (std::size_t i = 0; i < max_bytes && i < flat.size(); ++i)
    if (sentence_end(flat, i)) last_sentence = i + 1;
  if (last_sentence > max_bytes / 3) {
    flat.resize(last_sentence);
    if (flat.back() == ';') flat.back() = '.';
    return flat;
  }
  // Else whole words and an ellipsis.
  std::size_t cut = max_bytes - 3;
  while (cut > 0 && (static_cast<unsigned char>(flat[cut]) & 0xC0) == 0x80) --cut;  // stay on a UTF-8 boundary
  const std::size_t space = flat.rfind(' ', cut);
  if (space != std::string::npos && space > max_bytes / 2) cut = space;
  flat.resize(cut);
  while (!flat.empty() && (flat.back() == ' ' || flat.back() == ',' || flat.back() == ':')) flat.pop_back();
  return flat + "...";
}

nlohmann::ordered_json payload_member(const nlohmann::ordered_json& payload, std::string_view dot_path) {
  std::string pointer = "/";
  for (char c : dot_path) pointer += c == '.' ? '/' : c;
  const ordered_json* v = at_pointer(payload, pointer);
  return v ? *v : ordered_json();
}

BriefLines brief_lines(const Record& record) {
  BriefLines out;
  const ordered_json doc = ordered_json::parse(record.payload, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return out;
  const BriefRow& row = row_of(record.type);
  const auto [title, title_from] = first_text(doc, row.title);
  const auto [action, action_from] = first_text(doc, row.action);
  out.title = cut_text(title, kBriefTitleBytes);
  out.action = cut_text(action, kBriefActionBytes);
  if (out.action == out.title) out.action.clear();
  for (const auto pointer : kCitePointers) {
    std::string cite = text_at(doc, pointer);
    if (cite.empty()) continue;
    if (cite.size() <= kBriefCiteBytes) out.cite = std::move(cite);
    break;
  }
  // Detail fields: the container's members the lines did not show, sources excepted.
  const ordered_json* container = row.details.empty() ? &doc : at_pointer(doc, "/" + std::string(row.details));
  if (container && container->is_object()) {
    const std::string prefix = row.details.empty() ? "" : std::string(row.details) + ".";
    const std::string_view shown_title = member_of(title_from, row.details), shown_action = member_of(action_from, row.details);
    for (auto it = container->begin(); it != container->end(); ++it) {
      const std::string& key = it.key();
      if (key == "sources" || key == shown_title || key == shown_action) continue;
      out.detail_fields.push_back(prefix + key);
    }
  }
  return out;
}

}  // namespace kwiki::detail
