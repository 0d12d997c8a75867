#include "textflag.h"

// func int80(trap uintptr) uintptr
//
// Makes an i386 system call through the legacy int $0x80 gate: AX holds
// the i386 number, BX, CX and DX (the first arguments) are zero. The
// kernel answers in AX, a negative errno on failure.
TEXT ·int80(SB), NOSPLIT, $0-16
	MOVQ trap+0(FP), AX
	XORQ BX, BX
	XORQ CX, CX
	XORQ DX, DX
	INT  $0x80
	MOVQ AX, ret+8(FP)
	RET

// func int81(trap uintptr) uintptr
//
// The same through vector 0x81, a gate user space may not use: the
// instruction faults (SIGSEGV) and no system call is made, as int $0x80
// does on a kernel without 32-bit syscall emulation.
TEXT ·int81(SB), NOSPLIT, $0-16
	MOVQ trap+0(FP), AX
	XORQ BX, BX
	XORQ CX, CX
	XORQ DX, DX
	INT  $0x81
	MOVQ AX, ret+8(FP)
	RET
