#!/usr/bin/env bash
# Sets gateway up on this host from its clone, and starts the default
# profile's daemon: a Node >= 22.22 (a private Node 24 from the npm registry
# when the host's is older), the project's packages and build, and the
# `gateway` command in $GATEWAY_PREFIX/bin (default ~/.local/bin), which runs
# this clone with that Node. Run it again after pulling changes.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
prefix="${GATEWAY_PREFIX:-$HOME/.local}"

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
    work="$(mktemp -d)"
    (cd "$work" && npm pack --silent "node-linux-$arch@24" >/dev/null && tar xzf node-linux-*.tgz)
    rm -rf "$private"
    mkdir -p "$(dirname "$private")"
    mv "$work/package" "$private"
    rm -rf "$work"
  fi
  node="$private/bin/node"
  export PATH="$private/bin:$PATH"
fi
echo "== node $("$node" --version)"

echo "== npm ci (and the build)"
npm ci --no-audit --no-fund

mkdir -p "$prefix/bin"
launcher="$prefix/bin/gateway"
cat > "$launcher.tmp" <<EOF
#!/bin/sh
# The gateway command of $root, run with the Node it was installed with.
exec "$node" "$root/bin/run.js" "\$@"
EOF
chmod 755 "$launcher.tmp"
mv "$launcher.tmp" "$launcher"
echo "== installed $launcher"

"$launcher" start
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "Put gateway on your PATH: export PATH=\"$prefix/bin:\$PATH\"   (add it to ~/.profile to keep it)" ;;
esac
