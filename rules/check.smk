# Final outputs are checked (issue 26): no job reads a final table or figure, so a file
# damaged after it was written would go unnoticed. check_results reads each one's
# Parquet footer, PNG/PDF header and trailer or closing </html> (dpaudit.checks); it
# reruns whenever one is newer than its record (a truncated file is) and fails naming it.


rule check_results:
    input:
        final_outputs,
    output:
        P.RESULTS_CHECK,
    params:
        code=CODE["check_results"],
    log:
        P.log("check_results"),
    script:
        "../scripts/check_results.py"
