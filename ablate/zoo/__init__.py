"""Floor 5, beside the stages: building the zoo's models. `build` pretrains a recipe, measures
each checkpoint's Pass@k and picks the ladder rungs by measurement; `align` makes the aligned
rung by rejection-sampling fine-tuning on the model's own correct answers; `measure` is the one
Pass@k measurement both use; `built` the records a build returns. The built weights ship in
`ablate/models/zoo/` and load by name with `ablate.models.load_model`.

Why a package of its own, above `rollout/`: measuring a model samples it with the rollout
engine (`HFEngine`, `sample_and_verify`), and the engine runs the models' fused decoder
(`ablate.models.fast_llama`). Kept in `models/`, the build would import the engine that imports
`models/` back (a package circle); here every arrow points down: zoo -> rollout -> models ->
tasks. `ablate zoo build` (`ablate.commands.zoo`) is its one caller besides the tests."""
