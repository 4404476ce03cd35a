// A name family's spelling of the BLAS names: F(dgemm) is dgemm_64_ with F_SUFFIX=_64_, C(cblas_dgemm)
// cblas_dgemm64_ with C_SUFFIX=64_ (the compiler is given both). INTEGERs are 64-bit.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef int64_t I;
#define SOL_CAT2(a, b) a##b
#define SOL_CAT(a, b) SOL_CAT2(a, b)
#define F(name) SOL_CAT(name, F_SUFFIX)
#define C(name) SOL_CAT(name, C_SUFFIX)
