/* Helpers to put tunable macro values into clang loop pragmas. */
#ifndef EXAMPLEPROJ_PRAGMAS_H
#define EXAMPLEPROJ_PRAGMAS_H
#define R3_PRAGMA(text) _Pragma(#text)
#define R3_UNROLL(count) R3_PRAGMA(clang loop unroll_count(count))
#define R3_VECTORIZE(width) R3_PRAGMA(clang loop vectorize_width(width))
#endif
