import { expect } from 'chai';
import { refusedCalls, seccompProgram } from '../../../src/server/sandbox/seccomp.ts';

/** Runs a classic BPF seccomp program over one system call, as the kernel would: what it returns. */
function run(program: Buffer, call: { arch: number; nr: number; args?: number[] }): number {
  const data = Buffer.alloc(64);
  data.writeInt32LE(call.nr, 0);
  data.writeUInt32LE(call.arch, 4);
  (call.args ?? []).forEach((value, index) => data.writeUInt32LE(value >>> 0, 16 + index * 8));
  let accumulator = 0;
  for (let pc = 0; pc < program.length / 8;) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    switch (code) {
      case 0x20: accumulator = data.readUInt32LE(k); pc++; break;
      case 0x15: pc += 1 + (accumulator === k ? jt : jf); break;
      case 0x35: pc += 1 + (accumulator >= k ? jt : jf); break;
      case 0x45: pc += 1 + ((accumulator & k) !== 0 ? jt : jf); break;
      case 0x06: return k;
      default: throw new Error(`unknown instruction ${code.toString(16)} at ${pc}`);
    }
  }
  throw new Error('ran off the end of the program');
}

const X64 = 0xc000003e;
const ALLOW = 0x7fff0000;
const EPERM = 0x00050001;

describe('the sandbox\'s system-call filter', () => {
  const program = seccompProgram('x64');

  it('allows what commands use: read, write, openat, execve, a plain fork (clone without namespaces), ioctl TCGETS', () => {
    for (const nr of [0, 1, 257, 59, 231, 60]) expect(run(program, { arch: X64, nr }), String(nr)).to.equal(ALLOW);
    expect(run(program, { arch: X64, nr: 56, args: [0x01200011] }), 'fork').to.equal(ALLOW);
    expect(run(program, { arch: X64, nr: 16, args: [1, 0x5401] }), 'TCGETS').to.equal(ALLOW);
  });

  it('refuses namespaces, mounts, tracing, the keyring, eBPF, modules and faked terminal input with EPERM; clone3 with ENOSYS', () => {
    for (const [name, nr] of [['unshare', 272], ['setns', 308], ['mount', 165], ['ptrace', 101], ['keyctl', 250], ['bpf', 321], ['init_module', 175], ['perf_event_open', 298], ['io_uring_setup', 425]] as const) {
      expect(run(program, { arch: X64, nr }), name).to.equal(EPERM);
    }
    expect(run(program, { arch: X64, nr: 56, args: [0x10000000] }), 'clone with CLONE_NEWUSER').to.equal(EPERM);
    expect(run(program, { arch: X64, nr: 56, args: [0x00020000 | 0x11] }), 'clone with CLONE_NEWNS').to.equal(EPERM);
    expect(run(program, { arch: X64, nr: 435 }), 'clone3').to.equal(0x00050000 | 38);
    expect(run(program, { arch: X64, nr: 16, args: [0, 0x5412] }), 'TIOCSTI').to.equal(EPERM);
  });

  it('kills another architecture\'s calls and refuses the x32 ABI', () => {
    expect(run(program, { arch: 0x40000003, nr: 1 }), 'i386').to.equal(0x80000000);
    expect(run(program, { arch: X64, nr: 0x40000000 + 1 }), 'x32').to.equal(EPERM);
  });

  it('has a program for arm64 too, and names what it refuses', () => {
    const arm = seccompProgram('arm64');
    expect(run(arm, { arch: 0xc00000b7, nr: 97 }), 'unshare on arm64').to.equal(EPERM);
    expect(run(arm, { arch: 0xc00000b7, nr: 63 }), 'read on arm64').to.equal(ALLOW);
    expect(refusedCalls('x64')).to.include.members(['mount', 'unshare', 'ptrace', 'bpf']);
  });
});
