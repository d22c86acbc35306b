/* Devices, streams, memory, cuBLAS handles and the per-thread last error.
 * Built without C++ exceptions/RTTI/thread-safe statics so that C programs
 * link this library with the C compiler and no libstdc++. */
#include <cublas_v2.h>

#include "kg_internal.h"

/* A pointer with a constant initializer: plain TLS, no C++ runtime needed. */
static __thread const char *kg_last = "no error";

const char *kg_last_error(void)
{
    return kg_last;
}

int kg__fail(int rc, const char *why)
{
    kg_last = why ? why : "unknown error";
    return rc;
}

int kg__cuda(cudaError_t e)
{
    if (e == cudaSuccess)
        return KG_OK;
    /* Clear a non-sticky error so that it is not reported twice. */
    (void)cudaGetLastError();
    return kg__fail(KG_ECUDA, cudaGetErrorString(e));
}

int kg__launched(void)
{
    return kg__cuda(cudaGetLastError());
}

int kg_device_count(int *n)
{
    if (!n)
        return kg__fail(KG_EINVAL, "kg_device_count: n is NULL");
    *n = 0;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        /* No driver / no device: a normal answer, not an error. */
        (void)kg__cuda(e);
        return KG_OK;
    }
    if (count == 0)
        kg_last = "no CUDA device";
    *n = count;
    return KG_OK;
}

int kg_set_device(int dev)
{
    return kg__cuda(cudaSetDevice(dev));
}

int kg_device_arch(int dev, int *major, int *minor)
{
    if (!major || !minor)
        return kg__fail(KG_EINVAL, "kg_device_arch: NULL output");
    int rc = kg__cuda(cudaDeviceGetAttribute(
        major, cudaDevAttrComputeCapabilityMajor, dev));
    if (rc == KG_OK)
        rc = kg__cuda(cudaDeviceGetAttribute(
            minor, cudaDevAttrComputeCapabilityMinor, dev));
    return rc;
}

int kg_stream_create(kg_stream_t *out)
{
    if (!out)
        return kg__fail(KG_EINVAL, "kg_stream_create: out is NULL");
    *out = NULL;
    cudaStream_t s;
    int rc = kg__cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (rc == KG_OK)
        *out = s;
    return rc;
}

int kg_stream_destroy(kg_stream_t s)
{
    return s ? kg__cuda(cudaStreamDestroy(s)) : KG_OK;
}

int kg_stream_sync(kg_stream_t s)
{
    return kg__cuda(cudaStreamSynchronize(s));
}

int kg_malloc(void **p, size_t bytes, kg_stream_t s)
{
    if (!p)
        return kg__fail(KG_EINVAL, "kg_malloc: p is NULL");
    *p = NULL;
    if (bytes == 0)
        return KG_OK;
    void *q = NULL;
    int rc = kg__cuda(cudaMallocAsync(&q, bytes, s));
    if (rc == KG_OK)
        *p = q;
    return rc;
}

int kg_free(void *p, kg_stream_t s)
{
    return p ? kg__cuda(cudaFreeAsync(p, s)) : KG_OK;
}

int kg_malloc_host(void **p, size_t bytes)
{
    if (!p)
        return kg__fail(KG_EINVAL, "kg_malloc_host: p is NULL");
    *p = NULL;
    if (bytes == 0)
        return KG_OK;
    void *q = NULL;
    int rc = kg__cuda(cudaMallocHost(&q, bytes));
    if (rc == KG_OK)
        *p = q;
    return rc;
}

int kg_free_host(void *p)
{
    return p ? kg__cuda(cudaFreeHost(p)) : KG_OK;
}

static int kg_copy(void *dst, const void *src, size_t bytes,
                   cudaMemcpyKind kind, kg_stream_t s)
{
    if (bytes == 0)
        return KG_OK;
    if (!dst || !src)
        return kg__fail(KG_EINVAL, "kg_memcpy: NULL pointer");
    return kg__cuda(cudaMemcpyAsync(dst, src, bytes, kind, s));
}

int kg_memcpy_h2d(void *dst, const void *src, size_t bytes, kg_stream_t s)
{
    return kg_copy(dst, src, bytes, cudaMemcpyHostToDevice, s);
}

int kg_memcpy_d2h(void *dst, const void *src, size_t bytes, kg_stream_t s)
{
    return kg_copy(dst, src, bytes, cudaMemcpyDeviceToHost, s);
}

int kg_memcpy_d2d(void *dst, const void *src, size_t bytes, kg_stream_t s)
{
    return kg_copy(dst, src, bytes, cudaMemcpyDeviceToDevice, s);
}

int kg_memset(void *dst, int byte, size_t bytes, kg_stream_t s)
{
    if (bytes == 0)
        return KG_OK;
    if (!dst)
        return kg__fail(KG_EINVAL, "kg_memset: NULL pointer");
    return kg__cuda(cudaMemsetAsync(dst, byte, bytes, s));
}

int kg_blas_create(kg_blas_t *out, kg_stream_t s)
{
    if (!out)
        return kg__fail(KG_EINVAL, "kg_blas_create: out is NULL");
    *out = NULL;
    cublasHandle_t h;
    cublasStatus_t st = cublasCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS)
        return kg__fail(KG_ECUBLAS, cublasGetStatusString(st));
    st = cublasSetStream(h, s);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    if (st != CUBLAS_STATUS_SUCCESS) {
        (void)cublasDestroy(h);
        return kg__fail(KG_ECUBLAS, cublasGetStatusString(st));
    }
    *out = h;
    return KG_OK;
}

int kg_blas_destroy(kg_blas_t h)
{
    if (!h)
        return KG_OK;
    cublasStatus_t st = cublasDestroy(h);
    return st == CUBLAS_STATUS_SUCCESS
        ? KG_OK : kg__fail(KG_ECUBLAS, cublasGetStatusString(st));
}
