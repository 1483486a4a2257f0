#!/usr/bin/env bash
# Installs gateway on this host from its clone and starts the default
# profile's daemon (on a later run: restarts every running one).
#
# - Node >= 22.22: the host's, else a private Node 24 from the npm registry.
# - The clone is built in a folder of its own and packed (npm pack); the
#   package is installed, with its runtime dependencies only, into
#   $PREFIX/lib/gateway. The installed gateway never runs out of the clone:
#   `npm ci`, a rebuild or the tests in the clone leave it alone, and the clone
#   can go.
# - The `gateway` command goes into $PREFIX/bin. PREFIX is $GATEWAY_PREFIX,
#   else /usr/local for root (its bin is on root's PATH), else ~/.local.
#
# Run it again after pulling changes: the new copy replaces the old one whole,
# and the daemon of every profile that was running restarts on it (the default
# profile's starts when none was running).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
if [ -n "${GATEWAY_PREFIX:-}" ]; then
  prefix="$GATEWAY_PREFIX"
elif [ "$(id -u)" = 0 ]; then
  prefix=/usr/local
else
  prefix="$HOME/.local"
fi
dest="$prefix/lib/gateway"
launcher="$prefix/bin/gateway"

given_path="$PATH"
export npm_config_update_notifier=false
work="$(mktemp -d)"
trap 'rm -rf "$work" "$dest.new"' EXIT

node_ok() {
  "${1:-node}" -e '
    const [a, b] = process.versions.node.split(".").map(Number);
    process.exit(a > 22 || (a === 22 && b >= 22) ? 0 : 1)' 2>/dev/null
}

if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing npm (Debian package)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  else
    echo "gateway needs npm to install itself; install Node.js and npm (e.g. apt-get install nodejs npm), then run $0 again." >&2
    exit 1
  fi
fi

node="$(command -v node || true)"
if [ -z "$node" ] || ! node_ok "$node"; then
  private="$prefix/lib/gateway-node"
  if ! node_ok "$private/bin/node"; then
    case "$(uname -m)" in
      x86_64) arch=x64 ;;
      aarch64 | arm64) arch=arm64 ;;
      *) echo "No Node 24 package for $(uname -m) on the npm registry; install Node.js >= 22.22 yourself, then run $0 again." >&2; exit 1 ;;
    esac
    if [ -n "$node" ]; then have="Node $("$node" --version)"; else have="no Node"; fi
    echo "== fetching Node 24 from the npm registry into $private (this host has $have)"
    (cd "$work" && npm pack --silent "node-linux-$arch@24" >/dev/null && tar xzf node-linux-*.tgz && rm node-linux-*.tgz)
    rm -rf "$private"
    mkdir -p "$(dirname "$private")"
    mv "$work/package" "$private"
  fi
  node="$private/bin/node"
fi
# npm, the build and the package's scripts all run on this Node.
export PATH="$(dirname "$node"):$PATH"
echo "== node $("$node" --version)"

echo "== building a package of $root"
mkdir "$work/build"
for entry in package.json package-lock.json .npmrc tsconfig.json bin src scripts README.md; do
  cp -R "$root/$entry" "$work/build/"
done
(cd "$work/build" && npm ci --no-audit --no-fund --loglevel=error && npm pack --ignore-scripts --silent >/dev/null)

echo "== installing it into $dest"
rm -rf "$dest.new"
mkdir -p "$dest.new"
tar xzf "$work"/build/gateway-daemon-*.tgz -C "$dest.new" --strip-components=1
cp "$root/package-lock.json" "$dest.new/"
# Runtime dependencies only, at the versions the lock file names; the package's own build scripts are done.
(cd "$dest.new" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error)

# Every profile whose daemon runs the copy about to be replaced restarts on the new one (gateway profiles lists them all).
running=()
if [ -x "$launcher" ]; then
  while IFS= read -r name; do
    if [ -n "$name" ]; then running+=("$name"); fi
  done < <("$launcher" profiles list --json 2>/dev/null | "$node" -e '
    let text = "";
    process.stdin.on("data", (chunk) => { text += chunk; }).on("end", () => {
      try {
        for (const profile of JSON.parse(text).profiles) if (profile.state === "running") console.log(profile.name);
      } catch {}
    });' || true)
fi

mkdir -p "$prefix/bin"
rm -rf "$dest.old"
if [ -e "$dest" ]; then mv "$dest" "$dest.old"; fi
mv "$dest.new" "$dest"
cat > "$launcher.tmp" <<EOF
#!/bin/sh
# The gateway command, installed by scripts/install.sh into $dest, run with the Node it was installed with.
exec "$node" "$dest/bin/run.js" "\$@"
EOF
chmod 755 "$launcher.tmp"
mv "$launcher.tmp" "$launcher"
echo "== installed $launcher ($("$launcher" --version))"

failed=()
if [ "${#running[@]}" -gt 0 ]; then
  echo "== restarting on the new copy the daemons of the profiles that were running: ${running[*]}"
  for name in "${running[@]}"; do
    "$launcher" restart --profile "$name" || failed+=("$name")
  done
else
  "$launcher" start
fi
rm -rf "$dest.old"

case ":$given_path:" in
  *":$prefix/bin:"*) ;;
  *)
    echo
    echo "$prefix/bin is not on this shell's PATH. Run this, and add it to ~/.profile to keep it:"
    echo "  export PATH=\"$prefix/bin:\$PATH\""
    ;;
esac

if [ "${#failed[@]}" -gt 0 ]; then
  echo "The daemons of these profiles did not restart: ${failed[*]}. See: gateway logs --profile <name>" >&2
  exit 1
fi
