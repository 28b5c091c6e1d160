#include "common/binary.h"

namespace intentd::agent {

const char kSoftwareVersion[] = INTENTD_VERSION;

}  // namespace intentd::agent
