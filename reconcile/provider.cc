#include "reconcile/provider.h"

#include "reconcile/command_hook.h"
#include "reconcile/pix_api.h"

namespace intentd::reconcile {

std::unique_ptr<Provider> MakeProvider(const TypeSettings& settings, std::string* error) {
  std::unique_ptr<Provider> provider;
  std::string why;
  if (settings.pix_api && !settings.command) {
    provider = MakePixApiProvider(*settings.pix_api, &why);
  } else if (settings.command && !settings.pix_api) {
    provider = MakeCommandProvider(*settings.command, &why);
  } else {
    why = "exactly one of pix_api and command must be set";
  }
  if (provider == nullptr) *error = "reconcile." + settings.action_type + ": " + why;
  return provider;
}

}  // namespace intentd::reconcile
