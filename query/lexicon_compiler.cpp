// Build-time tool: compiles gpu-wiki/lexicon/lexicon.json into sorted C++ phrase tables and a
// small JSON of the rest, so kwiki starts without parsing or hashing a thousand phrases.
// Usage: kwiki_lexicon_compiler LEXICON.json OUT.cpp
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "tokenize.hpp"

using nlohmann::json;
using kwiki::detail::phrase_key;

namespace {

// Kinds, in the order of kwiki::detail::LexKind.
enum Kind { kProduct, kArch, kVendor, kDsl, kOperator, kDtype, kSymptom, kIntent, kHardwareField };

std::string c_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    } else out += static_cast<char>(c);
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kwiki_lexicon_compiler LEXICON.json OUT.cpp\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::stringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", argv[1], e.what());
    return 1;
  }
  std::set<std::tuple<std::string, int, std::string>> phrases;
  std::size_t longest = 1;
  auto add = [&](const std::string& name, Kind kind, const std::string& value) {
    const std::string key = phrase_key(name);
    if (key.empty()) return;
    longest = std::max<std::size_t>(longest, static_cast<std::size_t>(std::count(key.begin(), key.end(), ' ')) + 1);
    phrases.emplace(key, kind, value);
  };
  try {
    for (auto& p : doc.at("products")) {
      add(p.at("product"), kProduct, p.at("product"));
      for (const auto& n : p.at("names")) add(n, kProduct, p.at("product"));
      p.erase("names");
    }
    for (auto& a : doc.at("architectures")) {
      add(a.at("arch"), kArch, a.at("arch"));
      for (const auto& n : a.at("names")) add(n, kArch, a.at("arch"));
      a.erase("names");
    }
    for (const auto& [vendor, names] : doc.at("vendors").items())
      for (const auto& n : names) add(n, kVendor, vendor);
    for (const auto& f : doc.at("frameworks"))
      for (const auto& n : f.at("names")) add(n, kDsl, f.at("dsl"));
    for (auto& o : doc.at("operators")) {
      add(o.at("operator"), kOperator, o.at("operator"));
      for (const auto& n : o.at("names")) add(n, kOperator, o.at("operator"));
      o.erase("names");
    }
    for (const auto& [dtype, names] : doc.at("dtypes").items())
      for (const auto& n : names) add(n, kDtype, dtype);
    for (auto& s : doc.at("symptoms")) {
      add(s.at("label"), kSymptom, s.at("label"));
      for (const auto& n : s.at("names")) add(n, kSymptom, s.at("label"));
    }
    for (const auto& [intent, names] : doc.at("intents").items())
      for (const auto& n : names) add(n, kIntent, intent);
    for (auto& f : doc.at("hardware_fields")) {
      for (const auto& n : f.at("names")) add(n, kHardwareField, f.at("field"));
      f.erase("names");  // the field and what it serves stay for the loader
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: malformed lexicon: %s\n", argv[1], e.what());
    return 1;
  }
  for (const char* key : {"vendors", "frameworks", "dtypes", "symptoms", "intents", "about"}) doc.erase(key);

  std::ofstream out(std::string(argv[2]) + ".tmp");
  out << "// Generated from " << argv[1] << " by kwiki_lexicon_compiler; do not edit.\n"
      << "#include \"lexicon.hpp\"\n\nnamespace kwiki::detail {\n\n"
      << "extern const LexPhrase kLexPhrases[] = {\n";
  for (const auto& [phrase, kind, value] : phrases)
    out << "    {" << c_string(phrase) << ", static_cast<LexKind>(" << kind << "), " << c_string(value) << "},\n";
  out << "};\nextern const std::size_t kLexPhraseCount = " << phrases.size() << ";\n"
      << "extern const std::size_t kLexLongestPhrase = " << longest << ";\n"
      << "extern const char* const kLexiconRestText = " << c_string(doc.dump()) << ";\n\n}  // namespace kwiki::detail\n";
  out.close();
  if (!out || std::rename((std::string(argv[2]) + ".tmp").c_str(), argv[2]) != 0) {
    std::fprintf(stderr, "cannot write %s\n", argv[2]);
    return 1;
  }
  return 0;
}
