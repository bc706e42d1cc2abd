"""Reading memory at an address that may not be readable, without ever faulting.

The direct calls into QuickJS (native.py) start from pointers found inside the quickjs
binding's Python object. Before anything dereferences such a pointer, celld reads what it
points to here: the kernel does the copy and answers "not readable" with an error code
where a plain load would kill the process with SIGSEGV.

Two ways, both a copy made by the kernel that checks each page the way the process's own
loads would be checked (an unmapped page or one without read permission fails the call):

- `process_vm_readv` on our own pid: the syscall made for reading memory with errors
  instead of faults. A process may always read itself (the ptrace check passes for its
  own thread group), but some seccomp profiles refuse the syscall.
- Where it is refused, `write` of the range into a pipe, then `read` back: the kernel's
  copy from user memory fails with EFAULT instead of faulting.

Not used: /proc/self/mem, whose reads force their way through page protections (a guard
page would pass as readable), nor mincore/msync, which say whether a page is mapped, not
whether it may be read.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import threading

log = logging.getLogger("celld.isolate")

#: The most one read may ask for (a pipe takes it in one atomic write).
MAX_READ = 4096


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


class MemoryReader:
    """Copies of memory ranges of this process, or None where a range is not readable."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._readv = self._libc.process_vm_readv
        self._readv.restype = ctypes.c_ssize_t
        self._readv.argtypes = [
            ctypes.c_int,
            ctypes.POINTER(_IoVec),
            ctypes.c_ulong,
            ctypes.POINTER(_IoVec),
            ctypes.c_ulong,
            ctypes.c_ulong,
        ]
        self._write = self._libc.write
        self._write.restype = ctypes.c_ssize_t
        self._write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        self._lock = threading.Lock()
        self._pipe: tuple[int, int] | None = None
        #: "process_vm_readv" or "pipe": how reads are made here.
        self.method = "process_vm_readv"

    def read(self, address: int, size: int) -> bytes | None:
        """The `size` bytes at `address`, or None if any of them cannot be read."""
        if not 0 < size <= MAX_READ:
            raise ValueError(f"a read of {size} bytes (1 to {MAX_READ})")
        if address <= 0 or address + size >= 1 << 64:
            return None
        if self.method == "process_vm_readv":
            data = self._read_vm(address, size)
            if data is not False:
                return data
        return self._read_pipe(address, size)

    def _read_vm(self, address: int, size: int) -> bytes | None | bool:
        """The bytes, None when not readable, False when the syscall is refused here."""
        buffer = ctypes.create_string_buffer(size)
        local = _IoVec(ctypes.addressof(buffer), size)
        remote = _IoVec(address, size)
        copied = self._readv(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if copied == size:
            return buffer.raw
        if copied >= 0:
            return None  # a part of the range is not readable
        code = ctypes.get_errno()
        if code in (errno.EFAULT, errno.ENOMEM, errno.EINVAL):
            return None
        # ENOSYS or EPERM: the syscall is filtered here; pipes are never refused.
        log.info("reading memory through a pipe (process_vm_readv: %s)", os.strerror(code))
        self.method = "pipe"
        return False

    def _read_pipe(self, address: int, size: int) -> bytes | None:
        with self._lock:
            if self._pipe is None:
                self._pipe = os.pipe()
            out, into = self._pipe
            written = self._write(into, address, size)
            if written <= 0:
                code = ctypes.get_errno()
                if written < 0 and code != errno.EFAULT:
                    raise OSError(code, f"reading memory through a pipe: {os.strerror(code)}")
                return None
            data = os.read(out, written)  # (always all of it: the pipe was empty)
            return data if written == size else None


_reader: MemoryReader | None = None


def reader() -> MemoryReader:
    """The process's reader (made on first use)."""
    global _reader
    if _reader is None:
        _reader = MemoryReader()
    return _reader


def read(address: int, size: int) -> bytes | None:
    """The `size` bytes at `address` of this process, or None if they cannot be read."""
    return reader().read(address, size)
