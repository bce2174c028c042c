/* struct cbfs_errseq (cbfs/errseq.h), the rule both the engine and the FUSE
 * layer's plain files report unawaited failures by: every handle open at a
 * failure hears the newest once; a handle opened after it hears it only if
 * nobody has yet. */
#include <criterion/criterion.h>

#include "cbfs/errseq.h"

Test(errseq, every_open_handle_hears_the_newest_once)
{
    struct cbfs_errseq es = {0};
    uint64_t a = cbfs_errseq_sample(&es), b = cbfs_errseq_sample(&es);
    cr_assert_eq(cbfs_errseq_check(&es, &a), CBFS_OK, "no failure yet");
    cbfs_errseq_count(&es, CBFS_E_NOSPC);
    cbfs_errseq_count(&es, CBFS_E_IO);
    cr_assert_eq(cbfs_errseq_check(&es, &a), CBFS_E_IO, "the newest, to a");
    cr_assert_eq(cbfs_errseq_check(&es, &a), CBFS_OK, "a heard it already");
    cr_assert_eq(cbfs_errseq_check(&es, &b), CBFS_E_IO, "b hears it too");
    cr_assert_eq(cbfs_errseq_check(&es, &b), CBFS_OK);
}

Test(errseq, a_later_handle_hears_only_what_nobody_heard)
{
    struct cbfs_errseq es = {0};
    cbfs_errseq_count(&es, CBFS_E_IO);
    uint64_t late = cbfs_errseq_sample(&es); /* `sync FILE` right after the failure */
    cr_assert_eq(cbfs_errseq_check(&es, &late), CBFS_E_IO, "nobody had heard it");
    uint64_t later = cbfs_errseq_sample(&es);
    cr_assert_eq(cbfs_errseq_check(&es, &later), CBFS_OK, "heard before it opened: not its");
    cbfs_errseq_count(&es, CBFS_E_DQUOT);
    cr_assert_eq(cbfs_errseq_check(&es, &later), CBFS_E_DQUOT, "a new failure is");
}
