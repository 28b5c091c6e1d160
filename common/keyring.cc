#include "common/keyring.h"

#include <nlohmann/json.hpp>
#include <set>

#include "common/secret.h"

namespace intentd::agent {
namespace {

constexpr size_t kMaxIdBytes = 16;

bool IsHex(std::string_view s) {
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return !s.empty();
}

std::string_view TrimLine(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
    line.remove_suffix(1);
  }
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  return line;
}

// One "[*]ID:HEX" line; false when it has another shape.
bool ParseLine(std::string_view line, bool* current, std::string_view* id,
               std::string_view* secret) {
  *current = !line.empty() && line.front() == '*';
  if (*current) line.remove_prefix(1);
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return false;
  *id = line.substr(0, colon);
  *secret = line.substr(colon + 1);
  return Keyring::ValidId(*id) && secret->size() >= kMinSecretBytes && IsHex(*secret);
}

}  // namespace

bool Keyring::ValidId(std::string_view id) {
  if (id.empty() || id.size() > kMaxIdBytes) return false;
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return true;
}

Keyring Keyring::Single(std::string secret) {
  Keyring k;
  k.entries_.push_back({"0", std::make_shared<normalizers::KeyDeriver>(std::move(secret))});
  k.current_ = "0";
  return k;
}

Keyring Keyring::Borrowed(const normalizers::KeyDeriver& deriver) {
  Keyring k;
  k.entries_.push_back(
      {"0", std::shared_ptr<const normalizers::KeyDeriver>(&deriver, [](const auto*) {})});
  k.current_ = "0";
  return k;
}

const normalizers::KeyDeriver* Keyring::Find(std::string_view id) const {
  for (const Entry& e : entries_) {
    if (e.id == id) return e.deriver.get();
  }
  return nullptr;
}

std::vector<std::string> Keyring::ids() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.id);
  return out;
}

bool Keyring::Parse(std::string_view text, Keyring* out, std::string* error) {
  Keyring k;
  auto add = [&](std::string_view id, std::string_view secret) {
    if (!ValidId(id)) {
      *error = "the keyring has an id that is not 1 to 16 characters of A-Z a-z 0-9 _ . -";
      return false;
    }
    if (k.Has(id)) {
      *error = "the keyring holds id \"" + std::string(id) + "\" twice";
      return false;
    }
    if (secret.size() < kMinSecretBytes) {
      *error = "the keyring's secret \"" + std::string(id) + "\" is " +
               std::to_string(secret.size()) + " bytes; it must be at least " +
               std::to_string(kMinSecretBytes) + " (generate one with `intentd keygen --id " +
               std::string(id) + "`)";
      return false;
    }
    k.entries_.push_back(
        {std::string(id), std::make_shared<normalizers::KeyDeriver>(std::string(secret))});
    return true;
  };

  // JSON: an object with "keys" (anything else starting with '{' is a
  // plain secret, as it always was).
  const std::string_view body = TrimLine(text);
  // A member named twice in one object: JSON parsers keep the last one, so
  // a rotation typo would silently re-key an id. Found while parsing.
  std::vector<std::set<std::string>> members;
  std::string twice;
  const auto find_twice = [&](int /*depth*/, nlohmann::json::parse_event_t event,
                              nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::object_start) members.emplace_back();
    if (event == nlohmann::json::parse_event_t::object_end && !members.empty()) members.pop_back();
    if (event == nlohmann::json::parse_event_t::key && !members.empty() && parsed.is_string() &&
        !members.back().insert(parsed.get<std::string>()).second && twice.empty()) {
      twice = parsed.get<std::string>();
    }
    return true;
  };
  const nlohmann::json doc = !body.empty() && body.front() == '{'
                                 ? nlohmann::json::parse(body, find_twice, false)
                                 : nlohmann::json();
  if (doc.is_object() && doc.contains("keys") && !twice.empty()) {
    *error = "the keyring names \"" + twice +
             "\" twice (a JSON object keeps only the last one, so a typo would silently "
             "re-key that id)";
    return false;
  }
  if (doc.is_object() && doc.contains("keys")) {
    if (!doc["keys"].is_object() || !doc.contains("current") || !doc["current"].is_string()) {
      *error = "the keyring is JSON but not {\"current\": \"ID\", \"keys\": {\"ID\": \"SECRET\"}}";
      return false;
    }
    for (auto it = doc["keys"].begin(); it != doc["keys"].end(); ++it) {
      if (!it.value().is_string()) {
        *error = "the keyring's secret \"" + it.key() + "\" is not a string";
        return false;
      }
      if (!add(it.key(), it.value().get_ref<const std::string&>())) return false;
    }
    k.current_ = doc["current"].get<std::string>();
  } else {
    // Lines, if every line has the shape; else the plain form.
    std::vector<std::string_view> lines;
    for (size_t start = 0; start <= text.size();) {
      size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      const std::string_view line = TrimLine(text.substr(start, end - start));
      if (!line.empty() && line.front() != '#') lines.push_back(line);
      start = end + 1;
    }
    size_t keyring_lines = 0, first_other = 0;
    std::string_view marked;
    int marks = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      bool current = false;
      std::string_view id, secret;
      if (!ParseLine(lines[i], &current, &id, &secret)) {
        if (first_other == 0) first_other = i + 1;
        continue;
      }
      ++keyring_lines;
      if (current) {
        ++marks;
        marked = id;
      }
    }
    // Some keyring lines and some others: a keyring with a typo, never a
    // plain secret (which would key new intents with the wrong bytes).
    if (keyring_lines > 0 && keyring_lines < lines.size()) {
      *error = "the keyring's line " + std::to_string(first_other) +
               " (not counting blank and # lines) is not ID:SECRET (an id of 1 to 16 of "
               "A-Z a-z 0-9 _ . -, a colon, 32 or more hex digits; * before the current one)";
      return false;
    }
    if (keyring_lines == 0) {
      // The plain form: the text as given (LoadSecret dropped one trailing
      // newline of a file).
      std::string secret(text);
      if (secret.size() < kMinSecretBytes) {
        *error = "the HMAC secret is " + std::to_string(secret.size()) +
                 " bytes; it must be at least " + std::to_string(kMinSecretBytes) +
                 " (generate one with `intentd keygen`)";
        return false;
      }
      *out = Single(std::move(secret));
      return true;
    }
    if (marks > 1 || (marks == 0 && lines.size() > 1)) {
      *error = "the keyring must mark exactly one secret current, as \"*ID:SECRET\"";
      return false;
    }
    for (std::string_view line : lines) {
      bool current = false;
      std::string_view id, secret;
      ParseLine(line, &current, &id, &secret);
      if (!add(id, secret)) return false;
      if (marks == 0) marked = id;
    }
    k.current_ = std::string(marked);
  }
  if (k.entries_.empty()) {
    *error = "the keyring holds no secret";
    return false;
  }
  if (!k.Has(k.current_)) {
    *error = "the keyring's current id \"" + k.current_ + "\" is not one of its secrets";
    return false;
  }
  *out = std::move(k);
  return true;
}

bool LoadKeyring(const std::string& key_file, Keyring* keyring, std::string* source,
                 std::string* error) {
  std::string text;
  if (!LoadSecret(key_file, &text, source, error)) return false;
  if (!Keyring::Parse(text, keyring, error)) {
    *error += " (from " + *source + ")";
    return false;
  }
  return true;
}

}  // namespace intentd::agent
