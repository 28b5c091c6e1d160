#!/usr/bin/env bash
# Installs, upgrades, removes and purges the package with the real dpkg, in a
# private mount namespace where /etc, /usr and /var are throw-away overlays of
# the host's and /run is empty (no systemd running: the scripts' guards are
# exercised). The host is not changed. Needs root (for unshare and mount)
# and a root directory that is a mount point (not a plain chroot); otherwise
# the test is skipped (exit 77).
source "$(dirname "$0")/lib.sh"

if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null 2>&1; then
  say "SKIP: needs root and unshare(1) to sandbox dpkg"
  exit 77
fi
# In a chroot whose root is not a mount point (a fresh debootstrap root, say)
# no private mount namespace can be made: unshare cannot change the
# propagation of a mount above the root, and overlays mounted without that
# would propagate to the host's mounts. Then the sandbox cannot be built.
if ! err=$(unshare --mount --propagation private true 2>&1); then
  say "SKIP: cannot make a private mount namespace here ($err): / is not a mount point?"
  exit 77
fi
DEB=$(find_deb)
for d in etc usr var; do mkdir -p "$SCRATCH/upper/$d" "$SCRATCH/work/$d"; done

# Everything below runs inside the namespace.
cat >"$SCRATCH/inner.sh" <<'INNER'
set -euo pipefail
source "$LIB"
for d in etc usr var; do
  mount -t overlay "overlay-$d" -o "lowerdir=/$d,upperdir=$SCRATCH/upper/$d,workdir=$SCRATCH/work/$d" "/$d"
done
mount -t tmpfs -o mode=0755 tmpfs /run
[ ! -d /run/systemd/system ] || fail "sandbox: /run/systemd/system exists"

KEY=/etc/credstore/intentd.hmac-key
if getent passwd intentd >/dev/null || [ -e "$KEY" ] || dpkg-query -W intentd >/dev/null 2>&1; then
  fail "the host already has intentd installed or its user/secret; this test needs a clean host"
fi

dpkg_do() {  # dpkg_do what args...: runs dpkg, shows its output on failure
  local what=$1
  shift
  if ! dpkg "$@" >"$SCRATCH/dpkg.log" 2>&1; then
    cat "$SCRATCH/dpkg.log" >&2
    fail "dpkg $* ($what)"
  fi
  sed 's/^/    | /' "$SCRATCH/dpkg.log"
  CHECKS=$((CHECKS + 1))
  say "ok: $what"
}

say "--- fresh install"
dpkg_do "dpkg -i installs the package" -i "$DEB"
check "the system user intentd exists" getent passwd intentd
uid=$(getent passwd intentd | cut -d: -f3)
check "intentd is a system user (uid $uid < 1000)" test "$uid" -lt 1000
check "its shell is nologin" bash -c 'getent passwd intentd | grep -q ":/usr/sbin/nologin$"'
check "the group intentd exists" getent group intentd
check "the secret $KEY exists" test -f "$KEY"
check "the secret is mode 0600 root:root" test "$(stat -c '%a %U:%G' "$KEY")" = "600 root:root"
check "the secret is 64 hex characters and a newline (intentd keygen)" \
  grep -qxE '[0-9a-f]{64}' "$KEY"
check "/etc/credstore is 0700" test "$(stat -c %a /etc/credstore)" = 700
check "no temporary key file is left" bash -c '! ls -A /etc/credstore | grep -v "^intentd.hmac-key$"'
check "/run/intentd is 0750 root:intentd (tmpfiles)" test "$(stat -c '%a %U:%G' /run/intentd)" = "750 root:intentd"
check "the socket is enabled (sockets.target.wants link)" \
  test -L /etc/systemd/system/sockets.target.wants/intentd.socket
check "dpkg records /etc/intentd/intentd.json as a conffile" \
  bash -c 'dpkg-query -W -f="\${Conffiles}" intentd | grep -q "/etc/intentd/intentd.json"'
key_sum=$(sha256sum "$KEY")

say "--- reinstall the same version (postinst configure with a previous version)"
dpkg_do "dpkg -i again" -i "$DEB"
check "the secret was not replaced" test "$(sha256sum "$KEY")" = "$key_sum"

say "--- upgrade to a newer version, with an edited conffile"
echo '{"limits": {"max_connections": 7}}' >/etc/intentd/intentd.json
new=$SCRATCH/new
dpkg-deb -R "$DEB" "$new"
version=$(dpkg-deb -f "$DEB" Version)
sed -i "s/^Version: .*/Version: ${version}+test1/" "$new/DEBIAN/control"
dpkg-deb -b "$new" "$SCRATCH/intentd-upgrade.deb" >/dev/null
dpkg_do "dpkg -i upgrades to ${version}+test1" --force-confold -i "$SCRATCH/intentd-upgrade.deb"
check "the upgrade kept the edited conffile" grep -q '"max_connections": 7' /etc/intentd/intentd.json
check "the upgrade kept the secret" test "$(sha256sum "$KEY")" = "$key_sum"

say "--- remove"
mkdir -p /var/lib/intentd && echo records >/var/lib/intentd/CURRENT
dpkg_do "dpkg -r removes the package" -r intentd
check "the binary is gone" test ! -e /usr/bin/intentd
check "remove keeps the secret" test -f "$KEY"
check "remove keeps the conffile" test -f /etc/intentd/intentd.json

say "--- purge"
dpkg_do "dpkg -P purges the package" -P intentd
check "purge removes /etc/intentd" test ! -e /etc/intentd
check "purge removes the socket's enablement link" \
  test ! -e /etc/systemd/system/sockets.target.wants/intentd.socket -a ! -L /etc/systemd/system/sockets.target.wants/intentd.socket
check "purge keeps the secret (every stored key depends on it)" test "$(sha256sum "$KEY")" = "$key_sum"
check "purge keeps the records in /var/lib/intentd" grep -qx records /var/lib/intentd/CURRENT
check "purge keeps the user (Debian never removes system users)" getent passwd intentd
check "purge says what it kept" grep -q "keeps the records and the secret" "$SCRATCH/dpkg.log"

say "--- install again after purge"
dpkg_do "dpkg -i after purge" -i "$DEB"
check "the same user id is reused" test "$(getent passwd intentd | cut -d: -f3)" = "$uid"
check "the kept secret is reused, not replaced" test "$(sha256sum "$KEY")" = "$key_sum"

say "--- without systemd-sysusers (a container without systemd): adduser makes the user"
dpkg_do "dpkg -P" -P intentd
userdel intentd 2>/dev/null || true
groupdel intentd 2>/dev/null || true
check "the user is gone before the fallback install" bash -c '! getent passwd intentd && ! getent group intentd'
rm -f /usr/bin/systemd-sysusers /usr/bin/systemd-tmpfiles  # in the overlay only
dpkg_do "dpkg -i with adduser" -i "$DEB"
check "adduser made the system user intentd in group intentd" \
  bash -c '[ "$(id -gn intentd)" = intentd ] && [ "$(id -u intentd)" -lt 1000 ]'
check "with home /var/lib/intentd and shell nologin" \
  bash -c 'getent passwd intentd | grep -q ":/var/lib/intentd:/usr/sbin/nologin$"'
check "the secret is still the first one" test "$(sha256sum "$KEY")" = "$key_sum"
echo "$CHECKS" >"$SCRATCH/inner.checks"
INNER

say "sandbox: private mount namespace, overlays on /etc /usr /var, empty /run"
LIB="$(cd "$(dirname "$0")" && pwd)/lib.sh" SCRATCH=$SCRATCH DEB=$DEB INTENTD_PKG_NESTED=1 TEST_NAME=$TEST_NAME \
  unshare --mount --propagation private bash "$SCRATCH/inner.sh" \
  || fail "the install/upgrade/remove/purge sequence failed (see above)"
CHECKS=$(cat "$SCRATCH/inner.checks")
check "the host was not touched (no intentd user, no secret)" \
  bash -c '! getent passwd intentd >/dev/null && [ ! -e /etc/credstore/intentd.hmac-key ]'
done_ok
