/* A separate project using the installed package: find_package(fegpu). */
#include <fegpu.h>
#include <stdio.h>

int main(void) {
    fegpu_context_t ctx;
    double a[6] = {1, 2, 3, 4, 5, 6}, at[6]; /* 2 x 3, column-major */
    const double want[6] = {1, 3, 5, 2, 4, 6};
    char msg[256];
    if (fegpu_context_create(FEGPU_BACKEND_AUTO, 0, &ctx) != FEGPU_OK ||
        fegpu_dense_transpose_host_f64(ctx, 2, 3, a, at, FEGPU_VARIANT_AUTO) != FEGPU_OK) {
        fegpu_last_error_message(msg, sizeof msg);
        printf("fegpu failed: %s\n", msg);
        return 1;
    }
    for (int i = 0; i < 6; i++)
        if (at[i] != want[i]) {
            printf("wrong element %d: %g\n", i, at[i]);
            return 1;
        }
    fegpu_context_destroy(ctx);
    printf("C consumer: transpose correct\n");
    return 0;
}
