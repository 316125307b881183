use rten_onnx::onnx::{
    AttributeProto, DataType, Dimension, GraphProto, ModelProto, NodeProto, TensorProto,
    TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto,
};
use rten_tensor::{prelude::*, NdTensor};

use super::*;

/// Values in [-1, 1) from a simple generator, the same for the same seed.
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

fn constant(name: &str, dims: &[usize], data: Vec<f32>) -> TensorProto {
    TensorProto {
        name: Some(name.to_owned()),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: Some(DataType::FLOAT),
        float_data: data,
        ..TensorProto::default()
    }
}

fn ints_attribute(name: &str, ints: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_owned()),
        ints: ints.to_vec(),
        ..AttributeProto::default()
    }
}

fn node(op: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        name: Some(format!("{op} to {output}")),
        op_type: Some(op.to_owned()),
        input: inputs.iter().map(|&i| i.to_owned()).collect(),
        output: vec![output.to_owned()],
        attribute,
        ..NodeProto::default()
    }
}

/// A value's declaration, with its dimensions when given.
fn info(name: &str, dims: &[Option<usize>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            dim_value: d.map(|v| v as i64),
            dim_param: d.is_none().then(|| "batch".to_owned()),
        })
        .collect();
    ValueInfoProto {
        name: Some(name.to_owned()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: Some(DataType::FLOAT),
                shape: Some(TensorShapeProto { dim }),
            }),
            sequence: None,
        }),
    }
}

/// A model of `nodes` whose input `image` is declared `[batch, height, width, channels]`.
fn model(
    nodes: Vec<NodeProto>,
    initializer: Vec<TensorProto>,
    [height, width, channels]: [usize; 3],
    output: &str,
) -> ModelProto {
    ModelProto {
        graph: Some(GraphProto {
            node: nodes,
            initializer,
            input: vec![info(
                "image",
                &[None, Some(height), Some(width), Some(channels)],
            )],
            output: vec![info(output, &[])],
            value_info: Vec::new(),
        }),
        ..ModelProto::default()
    }
}

/// One convolution, computed directly: `input` is `height x width x c` (channels last),
/// `weights` `k x c x kh x kw` (ONNX's order); the output is channels last.
struct Direct {
    size: [usize; 2],
    channels: [usize; 2],
    kernel: usize,
    stride: usize,
    pad: usize,
}

impl Direct {
    fn out_size(&self) -> [usize; 2] {
        self.size
            .map(|side| (side + 2 * self.pad - self.kernel) / self.stride + 1)
    }

    fn compute(&self, input: &[f32], weights: &[f32], bias: &[f32]) -> Vec<f32> {
        let ([height, width], [c, k], n) = (self.size, self.channels, self.kernel);
        let [out_h, out_w] = self.out_size();
        let mut out = Vec::new();
        for y in 0..out_h {
            for x in 0..out_w {
                for o in 0..k {
                    let mut sum = f64::from(bias[o]);
                    for i in 0..c {
                        for dy in 0..n {
                            for dx in 0..n {
                                let in_y = (y * self.stride + dy).checked_sub(self.pad);
                                let in_x = (x * self.stride + dx).checked_sub(self.pad);
                                if let (Some(in_y), Some(in_x)) = (in_y, in_x) {
                                    if in_y < height && in_x < width {
                                        let v = input[(in_y * width + in_x) * c + i];
                                        let w = weights[((o * c + i) * n + dy) * n + dx];
                                        sum += f64::from(v) * f64::from(w);
                                    }
                                }
                            }
                        }
                    }
                    out.push(sum as f32);
                }
            }
        }
        out
    }

    /// A graph of the image's layout change, this convolution, an addition of `residual`
    /// (a second convolution of the same shape, 1x1, on the same image, when `residual`)
    /// and a ReLU; and what it must give.
    fn graph(&self, residual: bool) -> (ModelProto, Vec<f32>, Vec<f32>) {
        let ([height, width], [c, k], n) = (self.size, self.channels, self.kernel);
        let image = values(height * width * c, 1);
        let weights = values(k * c * n * n, 2);
        let bias = values(k, 3);
        let mut expected = self.compute(&image, &weights, &bias);
        let pad = self.pad as i64;
        let attributes = vec![
            ints_attribute("kernel_shape", &[n as i64, n as i64]),
            ints_attribute("strides", &[self.stride as i64; 2]),
            ints_attribute("pads", &[pad, pad, pad, pad]),
        ];
        let mut nodes = vec![
            node(
                "Transpose",
                &["image"],
                "nchw",
                vec![ints_attribute("perm", &[0, 3, 1, 2])],
            ),
            node("Conv", &["nchw", "w", "b"], "conv", attributes),
        ];
        let mut initializer = vec![
            constant("w", &[k, c, n, n], weights),
            constant("b", &[k], bias),
        ];
        let mut last = "conv";
        if residual {
            // The shortcut: a strided 1x1 convolution to the same shape.
            let shortcut = Direct {
                kernel: 1,
                pad: 0,
                ..*self
            };
            let (w, b) = (values(k * c, 4), values(k, 5));
            let added = shortcut.compute(&image, &w, &b);
            assert_eq!(added.len(), expected.len(), "a shortcut of another shape");
            for (e, a) in expected.iter_mut().zip(added) {
                *e += a;
            }
            let stride = self.stride as i64;
            nodes.insert(
                1,
                node(
                    "Conv",
                    &["nchw", "sw", "sb"],
                    "shortcut",
                    vec![
                        ints_attribute("kernel_shape", &[1, 1]),
                        ints_attribute("strides", &[stride, stride]),
                    ],
                ),
            );
            initializer.push(constant("sw", &[k, c, 1, 1], w));
            initializer.push(constant("sb", &[k], b));
            nodes.push(node("Add", &["conv", "shortcut"], "sum", Vec::new()));
            last = "sum";
        }
        nodes.push(node("Relu", &[last], "out", Vec::new()));
        for e in &mut expected {
            *e = e.max(0.0);
        }
        let shape = [height, width, c];
        (model(nodes, initializer, shape, "out"), image, expected)
    }
}

fn assert_close(actual: &[f32], expected: &[f32], tolerance: f32) {
    assert_eq!(actual.len(), expected.len());
    let worst = actual
        .iter()
        .zip(expected)
        .map(|(a, e)| (a - e).abs())
        .fold(0.0, f32::max);
    assert!(worst <= tolerance, "off by up to {worst}");
}

#[test]
fn every_kind_of_convolution_matches_a_direct_computation() {
    // (size, channels in and out, kernel, stride, padding, with a shortcut added)
    let cases = [
        // The model's first layer: 7x7, stride 2, 3 channels.
        ([20, 17], [3, 8], 7, 2, 3, false),
        // 3x3 by Winograd F(4x4): whole and partial tiles.
        ([16, 16], [16, 24], 3, 1, 1, true),
        ([18, 21], [5, 7], 3, 1, 1, false),
        // 3x3 by Winograd F(2x2), on smaller images.
        ([8, 8], [16, 24], 3, 1, 1, true),
        ([7, 7], [16, 8], 3, 1, 1, true),
        ([13, 10], [5, 7], 3, 1, 1, false),
        // 3x3 of stride 2: the product of the unfolded windows.
        ([9, 10], [4, 6], 3, 2, 1, true),
        // 1x1 with stride 2 (unfolded) and stride 1 (the image itself).
        ([9, 9], [16, 8], 1, 2, 0, true),
        ([6, 5], [32, 16], 1, 1, 0, false),
    ];
    for (size, channels, kernel, stride, pad, residual) in cases {
        let case = Direct {
            size,
            channels,
            kernel,
            stride,
            pad,
        };
        let (model, image, expected) = case.graph(residual);
        let network = Network::from_model(model).unwrap();

        let actual = network.run(&image).unwrap();

        assert_close(&actual, &expected, 1e-4);
    }
}

#[test]
fn max_pool_ignores_the_padding_and_the_head_gives_probabilities() {
    // The model's pool (3x3, stride 2, padded at the end), its mean, its dense layer and
    // its softmax, on a 5x4 image of 3 channels.
    let ([height, width], c) = ([5usize, 4usize], 3usize);
    let image: Vec<f32> = values(height * width * c, 6)
        .iter()
        .map(|v| v - 2.0)
        .collect();
    let (dense, bias) = (values(c * 2, 7), values(2, 8));
    let pool = vec![
        ints_attribute("kernel_shape", &[3, 3]),
        ints_attribute("strides", &[2, 2]),
        ints_attribute("pads", &[0, 0, 1, 1]),
    ];
    let nodes = vec![
        node(
            "Transpose",
            &["image"],
            "nchw",
            vec![ints_attribute("perm", &[0, 3, 1, 2])],
        ),
        node("MaxPool", &["nchw"], "pooled", pool),
        node(
            "AveragePool",
            &["pooled"],
            "mean",
            vec![ints_attribute("kernel_shape", &[2, 2])],
        ),
        node("Reshape", &["mean", "shape"], "row", Vec::new()),
        node("MatMul", &["row", "dense"], "product", Vec::new()),
        node("Add", &["product", "bias"], "logits", Vec::new()),
        node("Softmax", &["logits"], "out", Vec::new()),
    ];
    let initializer = vec![
        constant("dense", &[c, 2], dense.clone()),
        constant("bias", &[2], bias.clone()),
        constant("shape", &[2], vec![1.0, 3.0]),
    ];
    let shape = [height, width, c];
    let network = Network::from_model(model(nodes, initializer, shape, "out")).unwrap();

    let actual = network.run(&image).unwrap();

    // The pool: 2x2 outputs, each the maximum of its window cut to the image (all values
    // are negative, so a padding of zeros winning would show).
    let mut means = vec![0.0f32; c];
    for y in 0..2 {
        for x in 0..2 {
            for (channel, mean) in means.iter_mut().enumerate() {
                let mut max = f32::MIN;
                for in_y in 2 * y..(2 * y + 3).min(height) {
                    for in_x in 2 * x..(2 * x + 3).min(width) {
                        max = max.max(image[(in_y * width + in_x) * c + channel]);
                    }
                }
                *mean += max / 4.0;
            }
        }
    }
    let logits: Vec<f32> = (0..2)
        .map(|o| bias[o] + (0..c).map(|i| means[i] * dense[i * 2 + o]).sum::<f32>())
        .collect();
    let total: f32 = logits.iter().map(|l| l.exp()).sum();
    let expected: Vec<f32> = logits.iter().map(|l| l.exp() / total).collect();
    assert_close(&actual, &expected, 1e-6);
    assert!(means.iter().all(|&m| m < 0.0));
}

#[test]
fn an_operator_it_does_not_know_fails_loading_with_the_node_named() {
    let nodes = vec![node("Sigmoid", &["image"], "out", Vec::new())];

    let error = Network::from_model(model(nodes, Vec::new(), [2, 2, 3], "out"))
        .err()
        .unwrap();

    let message = format!("{error:#}");
    assert!(message.contains("Sigmoid to out"), "{message}");
    assert!(message.contains("not supported"), "{message}");
}

/// A 3x3 convolution of an 8x8 image of 3 channels: the model, an image, the output.
fn small_graph() -> (ModelProto, Vec<f32>, Vec<f32>) {
    Direct {
        size: [8, 8],
        channels: [3, 4],
        kernel: 3,
        stride: 1,
        pad: 1,
    }
    .graph(false)
}

#[test]
fn an_image_of_another_size_than_declared_is_an_error() {
    let (model, image, _) = small_graph();
    let network = Network::from_model(model).unwrap();

    assert!(network.run(&image).is_ok());
    assert!(network.run(&image[..image.len() - 1]).is_err());
    assert!(network.run(&[image.as_slice(), &[0.0]].concat()).is_err());
}

#[test]
fn an_input_without_a_declared_size_fails_loading() {
    let (mut model, ..) = small_graph();
    if let Some(graph) = model.graph.as_mut() {
        graph.input = vec![info("image", &[None, None, Some(8), Some(3)])];
    }

    let error = Network::from_model(model).err().unwrap();

    assert!(
        format!("{error:#}").contains("must be declared"),
        "{error:#}"
    );
}

#[test]
#[ignore = "needs the prepared models: TEST_MODEL_DIR"]
fn the_model_scores_as_rten_scores_it_and_concurrent_runs_agree() {
    let dir = std::env::var_os("TEST_MODEL_DIR").expect("TEST_MODEL_DIR");
    let path = Path::new(&dir).join(crate::models::nsfw::MODEL_FILE);
    let network = Network::load(&path).unwrap();
    let reference = crate::models::onnx::OnnxModel::load(&path, false).unwrap();
    let image: Vec<f32> = (0..224 * 224 * 3)
        .map(|i| ((i * 7 + i / 672 * 3) % 255) as f32 - 117.0)
        .collect();
    let tensor = NdTensor::from_data([1, 224, 224, 3], image.clone());
    let rten_scores: NdTensor<f32, 2> = reference
        .run(
            vec![(reference.inputs()[0].0, tensor.view().into())],
            &reference.outputs(),
        )
        .unwrap()
        .remove(0)
        .try_into()
        .unwrap();

    let alone = network.run(&image).unwrap();
    let together = crate::models::at_once(3, || network.run(&image).unwrap());

    assert_close(&alone, &rten_scores.to_vec(), 1e-5);
    assert!(together.iter().all(|scores| *scores == alone));
    let idle = network.idle.lock().unwrap().len();
    assert!((1..=3).contains(&idle), "{idle} idle scratch spaces");
}
