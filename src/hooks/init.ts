import type { Hook } from '@oclif/core';

const MINIMUM = [22, 22] as const;

/** Refuses to run on a Node.js older than the project supports, before any command loads. */
const hook: Hook.Init = async function () {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  if (major < MINIMUM[0] || (major === MINIMUM[0] && minor < MINIMUM[1])) {
    this.error(`gateway needs Node.js >= ${MINIMUM.join('.')}; this is ${process.version}.`, { exit: 1 });
  }
};

export default hook;
