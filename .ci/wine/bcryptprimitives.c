/* A stand-in for Windows' bcryptprimitives.dll, for running siftdb's
   Windows test executables under Debian's Wine in CI (.ci/run builds it
   with mingw and puts it in the CI Wine prefix's system32).

   Why: Rust's standard library (since 1.78) gets its random numbers (the
   HashMap keys, tempfile's names) from ProcessPrng in
   bcryptprimitives.dll, which Windows 10 and later have; Wine 8.0, the
   version Debian 12 ships, has no such DLL, so every Rust executable
   aborts at its first HashMap. This DLL exports ProcessPrng and forwards
   it to RtlGenRandom (advapi32's SystemFunction036), which Wine has.
   Nothing of siftdb itself uses it. */
#include <windows.h>
#define SystemFunction036 NTAPI SystemFunction036
#include <ntsecapi.h>
#undef SystemFunction036

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        /* RtlGenRandom takes a ULONG length: at most 256 MiB per call. */
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!RtlGenRandom(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
