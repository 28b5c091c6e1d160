// A Store that forwards the protocol's operations to another store and has
// none of the optional features (store/admin.h): what a backend without them
// looks like to its callers, whatever store the test opened.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "store/store.h"

namespace intentd::store {

class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(Store* to) : to_(to) {}

  Status Freeze(const IntentCandidate& request, FreezeResult* result) override {
    return to_->Freeze(request, result);
  }
  Status Begin(const IntentCandidate& request, int64_t lease_ms, BeginResult* result) override {
    return to_->Begin(request, lease_ms, result);
  }
  Status Complete(const std::string& tenant_id, const std::string& key, int64_t lease_token,
                  const std::string& response, Action* action) override {
    return to_->Complete(tenant_id, key, lease_token, response, action);
  }
  Status Fail(const std::string& tenant_id, const std::string& key, int64_t lease_token,
              const std::string& error, bool retriable, Action* action) override {
    return to_->Fail(tenant_id, key, lease_token, error, retriable, action);
  }
  Status Renew(const std::string& tenant_id, const std::string& key, int64_t lease_token,
               int64_t lease_ms, Action* action) override {
    return to_->Renew(tenant_id, key, lease_token, lease_ms, action);
  }
  Status GetAction(const std::string& tenant_id, const std::string& key, Action* action) override {
    return to_->GetAction(tenant_id, key, action);
  }
  Status Lookup(const std::string& tenant_id, const std::string& intent_ref,
                const std::string& action_type, LookupResult* result) override {
    return to_->Lookup(tenant_id, intent_ref, action_type, result);
  }
  Status Amend(const IntentCandidate& request, bool force, AmendResult* result) override {
    return to_->Amend(request, force, result);
  }
  Status DecideApproval(const std::string& tenant_id, const std::string& intent_ref,
                        const std::string& action_type, bool approve, const std::string& by,
                        const std::string& note, const std::string& error,
                        LookupResult* result) override {
    return to_->DecideApproval(tenant_id, intent_ref, action_type, approve, by, note, error,
                               result);
  }
  Status PendingApprovals(const std::optional<std::string>& tenant_id, size_t limit,
                          std::vector<Intent>* intents) override {
    return to_->PendingApprovals(tenant_id, limit, intents);
  }
  Status Uncertain(const std::optional<std::string>& tenant_id, size_t limit,
                   std::vector<Action>* actions) override {
    return to_->Uncertain(tenant_id, limit, actions);
  }
  Status Seen(const SeenRequest& request, std::vector<SeenAnswer>* answers) override {
    return to_->Seen(request, answers);
  }
  Status MessageDone(const std::string& tenant_id, const std::string& channel,
                     const std::string& message_id, int64_t lease_token,
                     MessageRecord* record) override {
    return to_->MessageDone(tenant_id, channel, message_id, lease_token, record);
  }
  Status ReleaseMessage(const std::string& tenant_id, const std::string& channel,
                        const std::string& message_id, int64_t lease_token,
                        MessageRecord* record) override {
    return to_->ReleaseMessage(tenant_id, channel, message_id, lease_token, record);
  }
  Status ForgetMessage(const std::string& tenant_id, const std::string& channel,
                       const std::string& message_id, bool* forgotten) override {
    return to_->ForgetMessage(tenant_id, channel, message_id, forgotten);
  }
  Status RegisterKeyId(const std::string& key_id) override { return to_->RegisterKeyId(key_id); }
  Status RegisteredKeyIds(std::vector<std::string>* key_ids) override {
    return to_->RegisteredKeyIds(key_ids);
  }
  Status UnregisterKeyId(const std::string& key_id) override {
    return to_->UnregisterKeyId(key_id);
  }
  Status CountKeyIdUsage(const std::vector<std::string>& only,
                         std::vector<KeyIdUsage>* usage) override {
    return to_->CountKeyIdUsage(only, usage);
  }
  Status DayCounters(const std::string& tenant_id, int64_t day,
                     std::vector<Counter>* counters) override {
    return to_->DayCounters(tenant_id, day, counters);
  }
  uint64_t DurabilityTicket() override { return to_->DurabilityTicket(); }
  void WhenDurable(uint64_t ticket, std::function<void(const Status&)> done) override {
    to_->WhenDurable(ticket, std::move(done));
  }
  TicketState CheckTicket(uint64_t ticket) override { return to_->CheckTicket(ticket); }

 private:
  Store* to_;
};

}  // namespace intentd::store
