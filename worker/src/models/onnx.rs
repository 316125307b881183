//! ONNX models run by rten. A run keeps to one core: every concurrent run gets a single-thread
//! pool of its own ([`CorePools`]), taken from a stack that grows to the number of runs at once
//! (bounded by the [`Inference`](super::Inference) slots); the multilingual encoder's runs use
//! the same pools. One open_nsfw image on two threads of a shared pool ran no faster than on
//! one, while two images on two pools of one thread ran twice as fast (docs/models-nsfw.md).
//! MiniLM's batches of 32 texts do split over two threads (1.9 times as fast), but under load
//! the text batcher runs two batches at once, one per core.

use std::{
    path::Path,
    sync::{Arc, Mutex, PoisonError},
};

use anyhow::{anyhow, Context};
use rten::{Model, ModelOptions, NodeId, RunOptions, ThreadPool, Value, ValueOrView};

/// Single-thread pools for model runs, one per run in progress, kept for the next runs: rten
/// and rten-gemm split their work over the current pool, so a run on one of these keeps to one
/// core.
#[derive(Default)]
pub struct CorePools {
    /// Pools not in use by a run.
    idle: Mutex<Vec<Arc<ThreadPool>>>,
}

impl CorePools {
    /// Calls `run` with a pool no other run holds (made when none is idle), then keeps the
    /// pool for the next run.
    pub fn with<T>(&self, run: impl FnOnce(&Arc<ThreadPool>) -> T) -> T {
        let pool = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .unwrap_or_else(|| Arc::new(ThreadPool::with_num_threads(1)));
        let result = run(&pool);
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(pool);
        result
    }

    /// Runs `op` on a pool of its own, on that pool's one thread.
    pub fn run<T: Send>(&self, op: impl FnOnce() -> T + Send) -> T {
        self.with(|pool| pool.run(op))
    }

    /// How many pools are idle.
    #[cfg(test)]
    pub fn idle(&self) -> usize {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// A loaded ONNX model, shared by every job of the process; `run` may be called from several
/// threads at once.
pub struct OnnxModel {
    model: Model,
    pools: CorePools,
}

impl OnnxModel {
    /// Loads the model at `path`; with `prepack`, its products' constant weights are laid out
    /// for the matrix kernels once, at load, instead of at every run (a copy of them).
    pub fn load(path: &Path, prepack: bool) -> anyhow::Result<Self> {
        let model = ModelOptions::with_all_ops()
            .prepack_weights(prepack)
            .load_file(path)
            .with_context(|| format!("{} could not be loaded", path.display()))?;
        Ok(Self {
            model,
            pools: CorePools::default(),
        })
    }

    /// The id of the value named `name` (an input, an output or any value inside the graph).
    pub fn node(&self, name: &str) -> anyhow::Result<NodeId> {
        self.model
            .find_node(name)
            .ok_or_else(|| anyhow!("the model has no value named {name}"))
    }

    /// The model's inputs and their names, in its order.
    pub fn inputs(&self) -> Vec<(NodeId, String)> {
        self.model
            .input_ids()
            .iter()
            .map(|&id| {
                let name = self.model.node_info(id).and_then(|info| info.name());
                (id, name.unwrap_or_default().to_owned())
            })
            .collect()
    }

    /// The model's outputs, in its order.
    pub fn outputs(&self) -> Vec<NodeId> {
        self.model.output_ids().to_vec()
    }

    /// Runs the model on `inputs` and returns the values `outputs`, on one core.
    pub fn run(
        &self,
        inputs: Vec<(NodeId, ValueOrView<'_>)>,
        outputs: &[NodeId],
    ) -> anyhow::Result<Vec<Value>> {
        let result = self.pools.with(|pool| {
            let options = RunOptions::default().with_thread_pool(Some(pool.clone()));
            self.model.run(inputs, outputs, Some(options))
        });
        Ok(result?)
    }
}

#[cfg(test)]
mod tests {
    use rten_tensor::{prelude::*, NdTensor};

    use super::*;

    #[test]
    #[ignore = "needs the prepared models: TEST_MODEL_DIR"]
    fn concurrent_runs_each_take_a_pool_and_give_the_same_values() {
        let dir = std::env::var_os("TEST_MODEL_DIR").expect("TEST_MODEL_DIR");
        let model = OnnxModel::load(
            &Path::new(&dir).join(crate::models::nsfw::MODEL_FILE),
            false,
        )
        .unwrap();
        let (input, output) = (model.inputs()[0].0, model.outputs()[0]);
        let image = NdTensor::<f32, 4>::from_fn([1, 224, 224, 3], |[_, y, x, c]| {
            ((y * 7 + x * 3 + c * 11) % 255) as f32 - 117.0
        });
        let run = || -> Vec<f32> {
            let values = model
                .run(vec![(input, image.view().into())], &[output])
                .unwrap();
            let scores: NdTensor<f32, 2> = values.into_iter().next().unwrap().try_into().unwrap();
            scores.to_vec()
        };
        let alone = run();

        let together = crate::models::at_once(3, run);

        assert!(together.iter().all(|values| *values == alone));
        // The first run made a pool; the three at once reused it and made at most two more;
        // every pool went back to the stack.
        let idle = model.pools.idle();
        assert!((1..=3).contains(&idle), "{idle} idle pools");
    }
}
