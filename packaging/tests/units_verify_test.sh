#!/usr/bin/env bash
# `systemd-analyze verify` on both packaged units, against the unpacked
# package (so ExecStart's /usr/bin/intentd and the man pages named in
# Documentation= resolve), plus the settings the issue asks for.
source "$(dirname "$0")/lib.sh"
unpack_deb

unit_dir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || echo /lib/systemd/system)
service=$ROOT$unit_dir/intentd.service
socket=$ROOT$unit_dir/intentd.socket
[ -f "$service" ] && [ -f "$socket" ] || fail "the units are not in $unit_dir of the package"

# verify --root needs the targets the units depend on (sysinit.target, ...):
# give the scratch root a copy of the host's units, without replacing ours.
cp -an "$unit_dir/." "$ROOT$unit_dir/"

say "systemd-analyze verify --root=<unpacked package> intentd.service intentd.socket"
if ! out=$(MANPATH=$ROOT/usr/share/man systemd-analyze verify --root="$ROOT" intentd.service intentd.socket 2>&1); then
  printf '%s\n' "$out" >&2
  fail "systemd-analyze verify failed"
fi
# verify exits 0 on an unknown key or an unparsable value ("..., ignoring"):
# any message at all is a failure here.
check_none "systemd-analyze verify prints no warning" "$out"

# The same verify must fail when the binary is missing (the check is real).
mv "$ROOT/usr/bin/intentd" "$ROOT/usr/bin/intentd.moved"
if MANPATH=$ROOT/usr/share/man systemd-analyze verify --root="$ROOT" intentd.service >/dev/null 2>&1; then
  fail "verify passed without /usr/bin/intentd in the root: it does not check ExecStart"
fi
mv "$ROOT/usr/bin/intentd.moved" "$ROOT/usr/bin/intentd"
CHECKS=$((CHECKS + 1)); say "ok: verify notices a missing ExecStart binary"

# Settings the service contract depends on (exact lines in the shipped units).
has_line() { grep -qxF -- "$2" "$1"; }
for line in "Type=notify" "User=intentd" "StateDirectory=intentd" "StateDirectoryMode=0700" \
            "LoadCredential=hmac-key:/etc/credstore/intentd.hmac-key" "Restart=on-failure" \
            "ExecStart=/usr/bin/intentd serve --data-dir /var/lib/intentd" \
            "ProtectSystem=strict" "NoNewPrivileges=yes" "PrivateNetwork=yes" \
            "RestrictAddressFamilies=AF_UNIX" "SystemCallFilter=@system-service" \
            "MemoryDenyWriteExecute=yes" "CapabilityBoundingSet=" "UMask=0077"; do
  check "intentd.service has $line" has_line "$service" "$line"
done
check "intentd.service sets a watchdog" grep -qE '^WatchdogSec=[1-9]' "$service"
check_none "intentd.service has no PrivateUsers= (the socket group must map)" "$(grep -E '^PrivateUsers=' "$service" || true)"
check_none "intentd.service has no Environment= secret" "$(grep -iE '^Environment.*(KEY|SECRET)' "$service" || true)"
for line in "ListenStream=/run/intentd/intentd.sock" "SocketMode=0660" "SocketUser=root" \
            "SocketGroup=intentd" "WantedBy=sockets.target"; do
  check "intentd.socket has $line" has_line "$socket" "$line"
done
check "tmpfiles.d makes /run/intentd 0750 root:intentd" \
  grep -qE '^d +/run/intentd +0750 +root +intentd' "$ROOT/usr/lib/tmpfiles.d/intentd.conf"
check "sysusers.d declares the system user intentd" \
  grep -qE '^u +intentd +- ' "$ROOT/usr/lib/sysusers.d/intentd.conf"

done_ok
