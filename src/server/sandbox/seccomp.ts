/**
 * The sandbox's system-call filter: a classic BPF program that bubblewrap
 * installs (--seccomp) just before it runs the command. It refuses, with
 * EPERM, what a tool command never needs and an attacker would: mounting and
 * namespaces (mount, unshare, setns, clone with a namespace flag; clone3,
 * whose flags a filter cannot read, answers ENOSYS so the C library falls
 * back to clone), tracing other processes (ptrace, process_vm_*), the kernel
 * keyring, eBPF, kernel modules and kexec, perf events, userfaultfd,
 * io_uring, open_by_handle_at, the clock, swap, reboot, and faking terminal
 * input (ioctl TIOCSTI, TIOCLINUX). Another architecture's system calls (an
 * i386 binary on x86-64, x32) are refused whole. Built here, without
 * libseccomp, for x86-64 and arm64.
 */

const LD_W_ABS = 0x20;
const JEQ_K = 0x15;
const JSET_K = 0x45;
const RET_K = 0x06;
const JGE_K = 0x35;

const ALLOW = 0x7fff0000;
const KILL_PROCESS = 0x80000000;
const errno = (value: number) => 0x00050000 | value;
const EPERM = 1;
const ENOSYS = 38;

/** Offsets in struct seccomp_data. */
const NR = 0;
const ARCH = 4;
const ARG = (index: number) => 16 + index * 8;

/** Namespace flags of clone(2): CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME. */
const CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080;
const TIOCSTI = 0x5412;
const TIOCLINUX = 0x541c;

interface Arch {
  audit: number;
  clone: number;
  clone3: number;
  ioctl: number;
  /** System calls refused with EPERM. */
  refused: Record<string, number>;
  /** Numbers from here up are another ABI (x32): refused. */
  abiFloor?: number;
}

/** x86-64's numbers (arch/x86/entry/syscalls/syscall_64.tbl). */
const X86_64: Arch = {
  audit: 0xc000003e, clone: 56, clone3: 435, ioctl: 16, abiFloor: 0x40000000,
  refused: {
    mount: 165, umount2: 166, pivot_root: 155, chroot: 161, unshare: 272, setns: 308, open_tree: 428, move_mount: 429, fsopen: 430, fsconfig: 431, fsmount: 432,
    fspick: 433, mount_setattr: 442, ptrace: 101, process_vm_readv: 310, process_vm_writev: 311, kcmp: 312, pidfd_getfd: 438, keyctl: 250, add_key: 248,
    request_key: 249, bpf: 321, init_module: 175, finit_module: 313, delete_module: 176, create_module: 174, kexec_load: 246, kexec_file_load: 320,
    perf_event_open: 298, userfaultfd: 323, io_uring_setup: 425, io_uring_enter: 426, io_uring_register: 427, open_by_handle_at: 304, name_to_handle_at: 303,
    fanotify_init: 300, lookup_dcookie: 212, quotactl: 179, acct: 163, swapon: 167, swapoff: 168, reboot: 169, sethostname: 170, setdomainname: 171,
    iopl: 172, ioperm: 173, settimeofday: 164, clock_settime: 227, clock_adjtime: 305, adjtimex: 159, syslog: 103, vhangup: 153, uselib: 134, ustat: 136,
    sysfs: 139, _sysctl: 156, nfsservctl: 180, get_kernel_syms: 177, query_module: 178,
  },
};

/** arm64's, the generic table (include/uapi/asm-generic/unistd.h). */
const ARM64: Arch = {
  audit: 0xc00000b7, clone: 220, clone3: 435, ioctl: 29,
  refused: {
    mount: 40, umount2: 39, pivot_root: 41, chroot: 51, unshare: 97, setns: 268, open_tree: 428, move_mount: 429, fsopen: 430, fsconfig: 431, fsmount: 432,
    fspick: 433, mount_setattr: 442, ptrace: 117, process_vm_readv: 270, process_vm_writev: 271, kcmp: 272, pidfd_getfd: 438, keyctl: 219, add_key: 217,
    request_key: 218, bpf: 280, init_module: 105, finit_module: 273, delete_module: 106, kexec_load: 104, kexec_file_load: 294, perf_event_open: 241,
    userfaultfd: 282, io_uring_setup: 425, io_uring_enter: 426, io_uring_register: 427, open_by_handle_at: 265, name_to_handle_at: 264, fanotify_init: 262,
    lookup_dcookie: 18, quotactl: 60, acct: 89, swapon: 224, swapoff: 225, reboot: 142, sethostname: 161, setdomainname: 162, settimeofday: 170,
    clock_settime: 112, clock_adjtime: 266, adjtimex: 171, syslog: 116, vhangup: 58,
  },
};

const ARCHES: Partial<Record<string, Arch>> = { x64: X86_64, arm64: ARM64 };

/** Whether this machine's architecture has a filter. */
export const seccompSupported = (arch = process.arch): boolean => ARCHES[arch] !== undefined;

/** The names of the system calls refused, for the docs and doctor. */
export const refusedCalls = (arch = process.arch): string[] => Object.keys(ARCHES[arch]?.refused ?? {}).concat('clone (namespaces)', 'clone3', 'ioctl TIOCSTI/TIOCLINUX');

/** The filter as bubblewrap reads it: struct sock_filter entries, in the machine's byte order. */
export function seccompProgram(arch = process.arch): Buffer {
  const table = ARCHES[arch];
  if (!table) throw new Error(`no system-call filter for ${arch}`);
  const program: [number, number, number, number][] = [];
  const op = (code: number, k: number, jt = 0, jf = 0) => program.push([code, jt, jf, k >>> 0]);
  // Another architecture's calls: the process is killed.
  op(LD_W_ABS, ARCH);
  op(JEQ_K, table.audit, 1, 0);
  op(RET_K, KILL_PROCESS);
  op(LD_W_ABS, NR);
  if (table.abiFloor !== undefined) {
    op(JGE_K, table.abiFloor, 0, 1);
    op(RET_K, errno(EPERM));
  }
  for (const nr of Object.values(table.refused)) {
    op(JEQ_K, nr, 0, 1);
    op(RET_K, errno(EPERM));
  }
  op(JEQ_K, table.clone3, 0, 1);
  op(RET_K, errno(ENOSYS));
  // clone: refused with a namespace flag in its first argument, else allowed.
  op(JEQ_K, table.clone, 0, 4);
  op(LD_W_ABS, ARG(0));
  op(JSET_K, CLONE_NAMESPACES, 0, 1);
  op(RET_K, errno(EPERM));
  op(RET_K, ALLOW);
  // ioctl: refused for faking terminal input, else allowed.
  op(JEQ_K, table.ioctl, 0, 5);
  op(LD_W_ABS, ARG(1));
  op(JEQ_K, TIOCSTI, 2, 0);
  op(JEQ_K, TIOCLINUX, 1, 0);
  op(RET_K, ALLOW);
  op(RET_K, errno(EPERM));
  op(RET_K, ALLOW);
  const buffer = Buffer.alloc(program.length * 8);
  program.forEach(([code, jt, jf, k], index) => {
    buffer.writeUInt16LE(code, index * 8);
    buffer.writeUInt8(jt, index * 8 + 2);
    buffer.writeUInt8(jf, index * 8 + 3);
    buffer.writeUInt32LE(k, index * 8 + 4);
  });
  return buffer;
}
