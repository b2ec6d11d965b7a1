// Public API of kwiki memory: a workspace's iteration records (memory/v<N>.json), validated.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kwiki {

/// The iteration records of one workspace. Every write is validated against the shipped JSON
/// Schema and is atomic (temporary file, fsync, rename); create, update and mask hold an
/// exclusive lock (memory/.kwiki-lock) across their read-modify-write, so concurrent processes
/// lose no update. Temporaries a killed writer left are removed by the next write.
class MemoryStore {
 public:
  /// The store of `workspace` (its memory/ folder).
  explicit MemoryStore(std::string workspace);

  /// Creates memory/ and writes schema.json there. Idempotent.
  void init() const;
  /// A new record for `version` ("v0", "v1", ...) from defaults overridden by `fields`.
  /// Throws kwiki::Error kBadInput: bad version name, existing version, schema violation.
  nlohmann::ordered_json create(const std::string& version, const nlohmann::ordered_json& fields = nlohmann::ordered_json::object()) const;
  /// Reads a version; a masked one only when include_masked. Throws kBadInput when unknown or masked.
  nlohmann::ordered_json read(const std::string& version, bool include_masked = false) const;
  /// Sets dot-path fields ("performance.latency_us") to typed values and re-validates.
  nlohmann::ordered_json update(const std::string& version, const std::vector<std::pair<std::string, nlohmann::ordered_json>>& sets) const;
  /// Masks or unmasks a version.
  void set_masked(const std::string& version, bool masked) const;
  /// Versions present, in numeric order (masked included).
  std::vector<std::string> list() const;
  /// The newest unmasked version, or nullopt.
  std::optional<std::string> latest() const;
  /// One row per version: version, masked, status, latency, SOL efficiency, speedup.
  nlohmann::ordered_json summary() const;
  /// Writes a whole record (validated, atomic). Throws kBadInput on a schema violation.
  void write(const nlohmann::ordered_json& record) const;

  /// Parses "--set a.b=value": JSON when the value is valid JSON (numbers, true/false/null,
  /// quoted strings, arrays, objects), else a plain string. Throws kUsage without '=' or when the
  /// value nests deeper than 64 levels.
  static std::pair<std::string, nlohmann::ordered_json> parse_assignment(const std::string& text);
  /// True for "v0", "v1", ..., "v999999" (no leading zeros, no suffixes).
  static bool valid_version(const std::string& version);

 private:
  std::string path_of(const std::string& version) const;
  /// write() for a caller that holds the lock.
  void write_locked(const nlohmann::ordered_json& record) const;
  std::string dir_;
};

/// One `kwiki memory` action (the CLI and the MCP memory tool).
struct MemoryRequest {
  std::string action;     ///< init | create | read | update | mask | unmask | summary | latest | list
  std::string workspace;
  std::string version;    ///< vN: create, read, update, mask, unmask
  std::vector<std::pair<std::string, nlohmann::ordered_json>> sets;  ///< field.path = value: create, update (at least one)
  bool include_masked = false;  ///< read: a masked version too
};

/// Runs the action: the record (create, read, update, latest), {"version","masked"} (mask,
/// unmask), {"initialized": dir} (init), the versions (list) or the summary rows (summary);
/// nullopt for `latest` when no version is unmasked. Throws kwiki::Error kUsage for an unknown
/// action or a missing --version / --set, and what the MemoryStore member it calls throws.
std::optional<nlohmann::ordered_json> run_memory_action(const MemoryRequest& request);

}  // namespace kwiki
