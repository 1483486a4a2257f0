// The first thing every entry point runs (the gateway command, npm run build,
// npm test), on whatever Node there is: a Node older than the project needs
// is said at once, with the ways to get a newer one.
'use strict';
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 22)) {
  const arch = process.arch === 'arm64' ? 'arm64' : 'x64';
  process.stderr.write([
    `gateway needs Node.js >= 22.22; this is ${process.version}.`,
    'Get a newer Node, then run the command again:',
    '  scripts/install.sh does it for you (a private Node 24, then gateway on PATH)',
    `  or from the npm registry:  npm pack node-linux-${arch}@24 && tar xzf node-linux-${arch}-*.tgz && export PATH="$PWD/package/bin:$PATH"`,
    '  or with nvm:               nvm install 24',
    '',
  ].join('\n'));
  process.exit(1);
}
