# An i386 program (no libc): creates /build/setid32 and tries to make it
# setuid with chmod through int $0x80, the 32-bit system-call table. Exits
# 0 when the chmod worked (an escape), 1 when it was refused.
        .section .rodata
path:   .asciz "/build/setid32"
        .text
        .globl _start
_start:
        movl $8, %eax           # creat(path, 0644)
        movl $path, %ebx
        movl $0644, %ecx
        int $0x80
        movl $15, %eax          # chmod(path, 04755)
        movl $path, %ebx
        movl $04755, %ecx
        int $0x80
        movl $1, %ebx
        testl %eax, %eax
        jnz 1f
        movl $0, %ebx
1:      movl $1, %eax           # exit(ebx)
        int $0x80
