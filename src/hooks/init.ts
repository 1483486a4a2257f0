import type { Hook } from '@oclif/core';

/**
 * The command is `gateway`, whatever the package is called (gateway-daemon):
 * help's VERSION line says what `gateway --version` says.
 */
const hook: Hook.Init = async function () {
  const config = this.config as { userAgent: string; bin: string };
  config.userAgent = config.userAgent.replace(/^[^/ ]+\//, `${config.bin}/`);
};

export default hook;
