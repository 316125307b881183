//! What the text heads' trainers share: per category an L2-regularised weighted logistic
//! regression fitted by Newton's method (deterministic: no random numbers), cross-validated
//! scores, and the threshold meeting the false-positive targets.

use moderation_worker::models::text::prototypes;

/// Categories, as the worker scores them.
pub const CATEGORIES: usize = prototypes::CATEGORIES.len();

/// The embeddings' components are scaled by this while training (a unit vector's components
/// are about `1 / sqrt(DIM)`), so that one regularisation strength suits every feature.
pub const EMBEDDING_SCALE: f64 = 20.0;
/// The margins are scaled by this while training: a larger scale regularises them less, so the
/// head leans on the prototypes and uses the embedding as a correction.
pub const MARGIN_SCALE: f64 = 40.0;
/// The L2 regularisation strength (on the scaled features; the bias is not regularised).
const LAMBDA: f64 = 0.1;
/// The weight of a category's positive examples.
const POSITIVE_WEIGHT: f64 = 2.0;
/// The weight, as a negative, of a text labelled with another harmful category: low, since
/// harassment and hate, or violence and harassment, often overlap.
const OTHER_HARM_WEIGHT: f64 = 0.3;
/// Cross-validation folds (example `i` is in fold `i % FOLDS`).
pub const FOLDS: usize = 5;

/// One embedded segment of an example: the example's index and its (scaled) features.
pub struct Row {
    pub example: usize,
    pub features: Vec<f64>,
}

/// How a head is fitted.
pub struct Fitting {
    features: usize,
    lambda: f64,
    positive_weight: f64,
    other_harm_weight: f64,
}

impl Fitting {
    /// The heads' fitting for rows of `features`: lambda [`LAMBDA`], positives weighing
    /// [`POSITIVE_WEIGHT`], other categories' harmful texts [`OTHER_HARM_WEIGHT`].
    pub fn standard(features: usize) -> Self {
        Self {
            features,
            lambda: LAMBDA,
            positive_weight: POSITIVE_WEIGHT,
            other_harm_weight: OTHER_HARM_WEIGHT,
        }
    }

    /// Per category, the weights (then the bias) fitted on `rows`; `labels` are the examples'.
    pub fn fit(&self, rows: &[&Row], labels: &[&str]) -> Vec<Vec<f64>> {
        prototypes::CATEGORIES
            .iter()
            .map(|(name, _)| {
                let targets: Vec<(f64, f64)> = rows
                    .iter()
                    .map(|row| {
                        let label = labels[row.example];
                        if label == *name {
                            (1.0, self.positive_weight)
                        } else if prototypes::CATEGORIES.iter().any(|(n, _)| *n == label) {
                            (0.0, self.other_harm_weight)
                        } else {
                            (0.0, 1.0)
                        }
                    })
                    .collect();
                self.logistic(rows, &targets)
            })
            .collect()
    }

    /// Out-of-fold scores: per example, per category, its segments' highest score from the
    /// model fitted without its fold (example `i` is in fold `i % folds`).
    pub fn cross_validate(
        &self,
        rows: &[Row],
        labels: &[&str],
        folds: usize,
    ) -> Vec<[f64; CATEGORIES]> {
        let mut oof = vec![[0.0f64; CATEGORIES]; labels.len()];
        for fold in 0..folds {
            let train: Vec<&Row> = rows.iter().filter(|r| r.example % folds != fold).collect();
            let models = self.fit(&train, labels);
            for row in rows.iter().filter(|r| r.example % folds == fold) {
                for (best, model) in oof[row.example].iter_mut().zip(&models) {
                    *best = best.max(predict(model, &row.features));
                }
            }
        }
        oof
    }

    /// An L2-regularised weighted logistic regression by Newton's method: `targets` holds each
    /// row's label and weight. Returns the feature weights followed by the bias.
    fn logistic(&self, rows: &[&Row], targets: &[(f64, f64)]) -> Vec<f64> {
        let features = self.features;
        let d = features + 1;
        let total: f64 = targets.iter().map(|(_, w)| w).sum();
        let mut model = vec![0.0; d];
        for _ in 0..50 {
            let mut gradient = vec![0.0; d];
            let mut hessian = vec![0.0; d * d];
            for (row, &(y, w)) in rows.iter().zip(targets) {
                let p = predict(&model, &row.features);
                let g = (p - y) * w / total;
                let h = p * (1.0 - p) * w / total;
                for a in 0..d {
                    let xa = feature(&row.features, a);
                    gradient[a] += g * xa;
                    let hx = h * xa;
                    for b in a..d {
                        hessian[a * d + b] += hx * feature(&row.features, b);
                    }
                }
            }
            for a in 0..d {
                let lambda = if a < features { self.lambda } else { 1e-9 };
                gradient[a] += lambda * model[a];
                hessian[a * d + a] += lambda;
                for b in 0..a {
                    hessian[a * d + b] = hessian[b * d + a];
                }
            }
            let step = solve(&mut hessian, gradient, d);
            let size = step.iter().map(|s| s * s).sum::<f64>().sqrt();
            for (m, s) in model.iter_mut().zip(step) {
                *m -= s;
            }
            if size < 1e-9 {
                break;
            }
        }
        model
    }
}

/// Feature `a` of a row, 1 for the bias.
fn feature(features: &[f64], a: usize) -> f64 {
    features.get(a).copied().unwrap_or(1.0)
}

/// The score of a row under a model (weights, then the bias).
pub fn predict(model: &[f64], features: &[f64]) -> f64 {
    let bias = model.last().copied().unwrap_or(0.0);
    let logit = bias + model.iter().zip(features).map(|(w, x)| w * x).sum::<f64>();
    1.0 / (1.0 + (-logit).exp())
}

/// Solves `matrix * x = rhs` for a symmetric positive definite `matrix` (`d` x `d`, row-major,
/// overwritten) by Cholesky decomposition.
fn solve(matrix: &mut [f64], mut rhs: Vec<f64>, d: usize) -> Vec<f64> {
    for j in 0..d {
        let mut diagonal = matrix[j * d + j];
        for k in 0..j {
            diagonal -= matrix[j * d + k] * matrix[j * d + k];
        }
        let diagonal = diagonal.max(1e-12).sqrt();
        matrix[j * d + j] = diagonal;
        for i in j + 1..d {
            let mut value = matrix[i * d + j];
            for k in 0..j {
                value -= matrix[i * d + k] * matrix[j * d + k];
            }
            matrix[i * d + j] = value / diagonal;
        }
    }
    for i in 0..d {
        for k in 0..i {
            rhs[i] -= matrix[i * d + k] * rhs[k];
        }
        rhs[i] /= matrix[i * d + i];
    }
    for i in (0..d).rev() {
        for k in i + 1..d {
            rhs[i] -= matrix[k * d + i] * rhs[k];
        }
        rhs[i] /= matrix[i * d + i];
    }
    rhs
}

/// A weight rounded to 1e-5: embeddings vary between runs in their last bits, which would
/// otherwise change the weight files' last digits.
pub fn rounded(weight: f64) -> f32 {
    ((weight * 1e5).round() / 1e5) as f32
}

/// Recall and false-positive rates of `chosen` examples flagged at `threshold`.
pub fn rates(oof: &[[f64; CATEGORIES]], labels: &[&str], chosen: &[usize], t: f64) -> [f64; 3] {
    let mut counts = [(0usize, 0usize); 3];
    for &i in chosen {
        let flagged = oof[i].iter().any(|s| *s >= t);
        let kind = match labels[i] {
            "ordinary" => 1,
            "innocent" => 2,
            "benign" => continue,
            _ => 0,
        };
        counts[kind].0 += 1;
        counts[kind].1 += usize::from(flagged);
    }
    counts.map(|(n, hit)| hit as f64 / n.max(1) as f64)
}

/// The threshold (a multiple of 0.01) with the highest cross-validated recall whose false
/// positives meet `targets` (ordinary, innocent-alarming); the highest such on ties.
pub fn choose_threshold(
    oof: &[[f64; CATEGORIES]],
    labels: &[&str],
    chosen: &[usize],
    targets: (f64, f64),
) -> f64 {
    let mut best = (0.5, -1.0);
    for step in 5..=95 {
        let t = f64::from(step) / 100.0;
        let [recall, ordinary, innocent] = rates(oof, labels, chosen, t);
        if ordinary <= targets.0 && innocent <= targets.1 && recall >= best.1 {
            best = (t, recall);
        }
    }
    best.0
}

/// Recall (per category and overall) and false positives, as a line.
pub fn describe(oof: &[[f64; CATEGORIES]], labels: &[&str], chosen: &[usize], t: f64) -> String {
    let [recall, ordinary, innocent] = rates(oof, labels, chosen, t);
    let mut line = format!(
        "recall {:.1} %, false positives {:.1} % ordinary, {:.1} % innocent;",
        recall * 100.0,
        ordinary * 100.0,
        innocent * 100.0
    );
    for (name, _) in prototypes::CATEGORIES {
        let of: Vec<usize> = chosen
            .iter()
            .copied()
            .filter(|&i| labels[i] == name)
            .collect();
        let [r, _, _] = rates(oof, labels, &of, t);
        line += &format!(" {name} {:.0} %", r * 100.0);
    }
    line
}
