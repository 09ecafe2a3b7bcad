// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html).
//
// GUARDED_BY(mu) on a member says it is read and written only with `mu` held; REQUIRES(mu) on a
// method says its caller must hold `mu`; EXCLUDES(mu) that it must not. A clang build with
// -Wthread-safety (deploy/thread-safety.sh, run by CI) checks them; other compilers ignore them.
// Use them with the annotated Mutex of core/mutex.h (libstdc++'s std::mutex is not annotated).
// Ours, not ABSL_GUARDED_BY: the installed core headers must not need Abseil
// (docs/design/architecture.md, "Abseil").
//
// Thread-safety: macros only.
#pragma once

#if defined(__clang__)
#define TR_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define TR_THREAD_ANNOTATION_(x)
#endif

#ifndef CAPABILITY
#define CAPABILITY(x) TR_THREAD_ANNOTATION_(capability(x))
#endif
#ifndef SCOPED_CAPABILITY
#define SCOPED_CAPABILITY TR_THREAD_ANNOTATION_(scoped_lockable)
#endif
#ifndef GUARDED_BY
#define GUARDED_BY(x) TR_THREAD_ANNOTATION_(guarded_by(x))
#endif
#ifndef PT_GUARDED_BY
#define PT_GUARDED_BY(x) TR_THREAD_ANNOTATION_(pt_guarded_by(x))
#endif
#ifndef ACQUIRED_BEFORE
#define ACQUIRED_BEFORE(...) TR_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#endif
#ifndef ACQUIRED_AFTER
#define ACQUIRED_AFTER(...) TR_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#endif
#ifndef REQUIRES
#define REQUIRES(...) TR_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#endif
#ifndef ACQUIRE
#define ACQUIRE(...) TR_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#endif
#ifndef RELEASE
#define RELEASE(...) TR_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#endif
#ifndef EXCLUDES
#define EXCLUDES(...) TR_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#endif
#ifndef ASSERT_CAPABILITY
#define ASSERT_CAPABILITY(x) TR_THREAD_ANNOTATION_(assert_capability(x))
#endif
#ifndef RETURN_CAPABILITY
#define RETURN_CAPABILITY(x) TR_THREAD_ANNOTATION_(lock_returned(x))
#endif
#ifndef NO_THREAD_SAFETY_ANALYSIS
#define NO_THREAD_SAFETY_ANALYSIS TR_THREAD_ANNOTATION_(no_thread_safety_analysis)
#endif
