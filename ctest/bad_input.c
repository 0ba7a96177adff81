/* Bad input from C: null pointers, zero and negative sizes, mismatched
 * shapes, stale and foreign handles. Each call must return its status with a
 * message naming the argument, and change nothing. */
#include <fegpu.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int checks, failures;

static void expect(fegpu_status got, fegpu_status want, const char *word, const char *what) {
    char msg[512];
    fegpu_last_error_message(msg, sizeof msg);
    checks++;
    if (got != want || (word && !strstr(msg, word))) {
        failures++;
        printf("FAIL: %s: status %d (want %d), message \"%s\" (want \"%s\")\n", what, got, want, msg, word ? word : "");
    }
}

int main(void) {
    fegpu_context_t ctx = 0;
    fegpu_array_t a = 0, b = 0, c = 0;
    double x[12], y[12];
    for (int i = 0; i < 12; i++) x[i] = i + 1, y[i] = -1;

    expect(fegpu_context_create(FEGPU_BACKEND_AUTO, 0, NULL), FEGPU_ERR_INVALID_ARGUMENT, "ctx is a null pointer", "null ctx out-parameter");
    expect(fegpu_context_create(FEGPU_BACKEND_AUTO, 0, &ctx), FEGPU_OK, NULL, "create context");
    expect(fegpu_array_create_f64(ctx, 3, 4, NULL, &a), FEGPU_ERR_INVALID_ARGUMENT, "host is a null pointer", "null host data");
    expect(fegpu_array_create_f64(ctx, 0, 4, x, &a), FEGPU_ERR_INVALID_ARGUMENT, "rows = 0", "zero rows");
    expect(fegpu_array_create_f64(ctx, 3, -4, x, &a), FEGPU_ERR_INVALID_ARGUMENT, "cols = -4", "negative cols");
    expect(fegpu_array_create_f64(ctx, 3, 4, x, &a), FEGPU_OK, NULL, "create a");
    expect(fegpu_array_create_f64(ctx, 3, 4, y, &b), FEGPU_OK, NULL, "create b");
    expect(fegpu_dense_transpose(a, b, FEGPU_VARIANT_AUTO), FEGPU_ERR_SIZE_MISMATCH, "dst must be 4 x 3", "mismatched shapes");
    expect(fegpu_array_download_f64(b, y, 12), FEGPU_OK, NULL, "download b");
    int unchanged = 1;
    for (int i = 0; i < 12; i++) unchanged &= (y[i] == -1);
    expect(unchanged ? FEGPU_OK : FEGPU_ERR_INTERNAL, FEGPU_OK, NULL, "b unchanged by the failed transpose");
    expect(fegpu_array_download_f64(a, NULL, 12), FEGPU_ERR_INVALID_ARGUMENT, "host is a null pointer", "null download target");
    expect(fegpu_array_upload_f64(a, x, 11), FEGPU_ERR_SIZE_MISMATCH, "count = 11", "short upload");
    expect(fegpu_dense_transpose_host_f64(ctx, 3, 4, x, NULL, 0), FEGPU_ERR_INVALID_ARGUMENT, "at is a null pointer", "null host output");
    expect(fegpu_dense_transpose(a, ctx, 0), FEGPU_ERR_INVALID_HANDLE, "fegpu_context_t", "context passed as an array");
    expect(fegpu_array_destroy(a), FEGPU_OK, NULL, "destroy a");
    expect(fegpu_dense_copy(a, b, 0), FEGPU_ERR_INVALID_HANDLE, "destroyed", "destroyed handle");
    expect(fegpu_dense_copy(0, b, 0), FEGPU_ERR_INVALID_HANDLE, "null handle", "handle 0");
    expect(fegpu_array_create_empty(ctx, FEGPU_DTYPE_F32, 2, 2, &c), FEGPU_OK, NULL, "create c");
    expect(fegpu_context_destroy(ctx), FEGPU_OK, NULL, "destroy context");
    expect(fegpu_array_destroy(c), FEGPU_ERR_INVALID_HANDLE, "destroyed", "array of a destroyed context");
    expect(fegpu_context_synchronize(ctx), FEGPU_ERR_INVALID_HANDLE, "destroyed", "destroyed context");
    expect(fegpu_last_error_message(NULL, 10), FEGPU_ERR_INVALID_ARGUMENT, NULL, "null message buffer");
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
