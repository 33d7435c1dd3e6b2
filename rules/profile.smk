# Privacy profile (LeBlond et al. 2023): per numeric view, a base model, its
# worst-case and exact neighbours, mechanism samples, single and typical
# profiles, regime thresholds and Figs 1-8. No trained run is involved.


rule download_profile_data:
    output:
        "resources/raw/profile/{source}/{filename}",
    params:
        sources=profile_download_sources,
        code=CODE["download_profile_data"],
    log:
        "logs/download_profile_data/{source}/{filename}.log",
    retries: 1
    script:
        "../scripts/download_profile_data.py"


rule profile_base:
    input:
        unpack(profile_raw_inputs),
    output:
        data="results/profile/{view}/data.parquet",
        per_example="results/profile/{view}/per_example.parquet",
        worst_case="results/profile/{view}/worst_case.parquet",
        base="results/profile/{view}/base.json",
    params:
        view=profile_view_spec,
        lam=PROFILE["lam"],
        code=CODE["profile_base"],
    log:
        "logs/profile_base/{view}.log",
    script:
        "../scripts/profile_base.py"


rule profile_exact:
    input:
        unpack(profile_raw_inputs),
        base="results/profile/{view}/base.json",
        worst_case="results/profile/{view}/worst_case.parquet",
    output:
        "results/profile/{view}/exact.parquet",
    params:
        view=profile_view_spec,
        lam=PROFILE["lam"],
        code=CODE["profile_exact"],
    log:
        "logs/profile_exact/{view}.log",
    benchmark:
        "benchmarks/profile_exact/{view}.tsv"
    script:
        "../scripts/profile_exact.py"


rule profile_samples:
    input:
        unpack(profile_raw_inputs),
        base="results/profile/{view}/base.json",
        worst_case="results/profile/{view}/worst_case.parquet",
    output:
        "results/profile/{view}/samples.parquet",
    params:
        view=profile_view_spec,
        lam=PROFILE["lam"],
        samples=PROFILE["samples"],
        seed=PROFILE["seed"],
        code=CODE["profile_samples"],
    log:
        "logs/profile_samples/{view}.log",
    benchmark:
        "benchmarks/profile_samples/{view}.tsv"
    script:
        "../scripts/profile_samples.py"


rule profile_single:
    input:
        base="results/profile/{view}/base.json",
        worst_case="results/profile/{view}/worst_case.parquet",
    output:
        "results/profile/{view}/single_model.parquet",
    params:
        lam=PROFILE["lam"],
        log10_epsilon=PROFILE["single_model_log10_epsilon"],
        seed=PROFILE["seed"],
        code=CODE["profile_single"],
    log:
        "logs/profile_single/{view}.log",
    script:
        "../scripts/profile_single.py"


rule profile_typical:
    input:
        base="results/profile/{view}/base.json",
        worst_case="results/profile/{view}/worst_case.parquet",
    output:
        typical="results/profile/{view}/typical.parquet",
        per_neighbour="results/profile/{view}/per_neighbour.parquet",
        thresholds="results/profile/{view}/thresholds.json",
        metrics="results/metrics/profile/{view}.parquet",
    params:
        lam=PROFILE["lam"],
        log10_epsilons=PROFILE["log10_epsilons"],
        draws=PROFILE["draws"],
        seed=PROFILE["seed"],
        code=CODE["profile_typical"],
    log:
        "logs/profile_typical/{view}.log",
    benchmark:
        "benchmarks/profile_typical/{view}.tsv"
    script:
        "../scripts/profile_typical.py"


rule plot_profile:
    input:
        base="results/profile/{view}/base.json",
        worst_case="results/profile/{view}/worst_case.parquet",
        exact="results/profile/{view}/exact.parquet",
        single="results/profile/{view}/single_model.parquet",
        typical="results/profile/{view}/typical.parquet",
        per_neighbour="results/profile/{view}/per_neighbour.parquet",
        thresholds="results/profile/{view}/thresholds.json",
    output:
        **{
            f"fig{k}": report(
                f"results/figures/profile/{{view}}/fig{k}.png",
                caption=f"../workflow/report/profile_fig{k}.rst",
                category="Privacy profile",
                labels={"view": "{view}", "figure": f"Fig {k}"},
            )
            for k in range(2, 8)
        },
        **{f"fig{k}_pdf": f"results/figures/profile/{{view}}/fig{k}.pdf" for k in range(2, 8)},
    params:
        code=CODE["plot_profile"],
    log:
        "logs/plot_profile/{view}.log",
    script:
        "../scripts/plot_profile.py"


rule plot_profile_samples:
    input:
        "results/profile/{view}/samples.parquet",
    output:
        **{
            f"fig{k}": report(
                f"results/figures/profile/{{view}}/fig{k}.png",
                caption=f"../workflow/report/profile_fig{k}.rst",
                category="Privacy profile",
                labels={"view": "{view}", "figure": f"Fig {k}"},
            )
            for k in (1, 8)
        },
        **{f"fig{k}_pdf": f"results/figures/profile/{{view}}/fig{k}.pdf" for k in (1, 8)},
    params:
        code=CODE["plot_profile_samples"],
    log:
        "logs/plot_profile_samples/{view}.log",
    script:
        "../scripts/plot_profile_samples.py"
