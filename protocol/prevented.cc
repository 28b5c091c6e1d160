#include "protocol/prevented.h"

namespace intentd::agent {

void PreventedCounters::SetActionTypes(const std::vector<normalizers::ActionType>& types) {
  types_.clear();
  for (const normalizers::ActionType& t : types) {
    auto type = std::make_unique<Type>();
    type->name = t.name;
    for (const normalizers::FieldSpec& f : t.fields) {
      if (f.kind != normalizers::FieldKind::kMoney) continue;
      auto field = std::make_unique<Field>();
      field->name = f.name;
      type->money.push_back(std::move(field));
    }
    types_.push_back(std::move(type));
  }
}

void PreventedCounters::Count(std::string_view action_type, store::Decision decision,
                              store::ActionStatus status, std::string_view payload) {
  int which;
  if (decision == store::Decision::kReplay && status == store::ActionStatus::kCompleted) {
    which = 0;
  } else if (decision == store::Decision::kRecover) {
    which = 1;
  } else {
    return;
  }
  for (const auto& type : types_) {
    if (type->name != action_type) continue;
    type->count[which].fetch_add(1, std::memory_order_relaxed);
    if (type->money.empty()) return;
    // Only here is the payload parsed: replays and recoveries, of types that
    // hold money. A value that is not integer cents (it always is, frozen by
    // the money normalizer) adds nothing.
    const nlohmann::json frozen = nlohmann::json::parse(payload, nullptr, false);
    if (!frozen.is_object()) return;
    for (const auto& field : type->money) {
      auto it = frozen.find(field->name);
      if (it == frozen.end() || !it->is_string()) continue;
      const std::string& text = it->get_ref<const std::string&>();
      if (text.empty() || text.size() > 18 ||
          text.find_first_not_of("0123456789") != std::string::npos)
        continue;
      field->cents[which].fetch_add(std::stoull(text), std::memory_order_relaxed);
    }
    return;
  }
}

nlohmann::json PreventedCounters::Json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& type : types_) {
    nlohmann::json cents[2] = {nlohmann::json::object(), nlohmann::json::object()};
    for (const auto& field : type->money) {
      for (int i = 0; i < 2; ++i) cents[i][field->name] = field->cents[i].load();
    }
    out[type->name] = {{"replayed", type->count[0].load()},
                       {"recovered", type->count[1].load()},
                       {"replayed_cents", cents[0]},
                       {"recovered_cents", cents[1]}};
  }
  return out;
}

}  // namespace intentd::agent
