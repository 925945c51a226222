tamp-profile 1
# bert_base compute profile, written by models/make_layouts.py (do not edit; rerun it).
# Source: Devlin et al. 2019 (NAACL), BERT-base; Hugging Face names.
# 199 tensors, 109,482,240 parameters.
# ESTIMATE, NOT A MEASUREMENT: forward ms = the layer's forward FLOPs at batch 32 sequences of 128 tokens
# / an assumed sustained 10 TFLOP/s; backward = 2 x forward. One step: 214.7 ms.
# Change `scale` to rescale every time (e.g. 0.5 for a GPU twice that rate).
scale 1
# layer FORWARD_MS BACKWARD_MS TENSORS...
layer 0.0025 0.0050 embeddings.word_embeddings.weight embeddings.position_embeddings.weight embeddings.token_type_embeddings.weight embeddings.LayerNorm.weight embeddings.LayerNorm.bias
layer 1.6106 3.2212 encoder.layer.0.attention.self.query.weight encoder.layer.0.attention.self.query.bias encoder.layer.0.attention.self.key.weight encoder.layer.0.attention.self.key.bias encoder.layer.0.attention.self.value.weight encoder.layer.0.attention.self.value.bias
layer 0.4857 0.9714 encoder.layer.0.attention.output.dense.weight encoder.layer.0.attention.output.dense.bias encoder.layer.0.attention.output.LayerNorm.weight encoder.layer.0.attention.output.LayerNorm.bias
layer 1.9327 3.8655 encoder.layer.0.intermediate.dense.weight encoder.layer.0.intermediate.dense.bias
layer 1.9353 3.8705 encoder.layer.0.output.dense.weight encoder.layer.0.output.dense.bias encoder.layer.0.output.LayerNorm.weight encoder.layer.0.output.LayerNorm.bias
layer 1.6106 3.2212 encoder.layer.1.attention.self.query.weight encoder.layer.1.attention.self.query.bias encoder.layer.1.attention.self.key.weight encoder.layer.1.attention.self.key.bias encoder.layer.1.attention.self.value.weight encoder.layer.1.attention.self.value.bias
layer 0.4857 0.9714 encoder.layer.1.attention.output.dense.weight encoder.layer.1.attention.output.dense.bias encoder.layer.1.attention.output.LayerNorm.weight encoder.layer.1.attention.output.LayerNorm.bias
layer 1.9327 3.8655 encoder.layer.1.intermediate.dense.weight encoder.layer.1.intermediate.dense.bias
layer 1.9353 3.8705 encoder.layer.1.output.dense.weight encoder.layer.1.output.dense.bias encoder.layer.1.output.LayerNorm.weight encoder.layer.1.output.LayerNorm.bias
layer 1.6106 3.2212 encoder.layer.2.attention.self.query.weight encoder.layer.2.attention.self.query.bias encoder.layer.2.attention.self.key.weight encoder.layer.2.attention.self.key.bias encoder.layer.2.attention.self.value.weight encoder.layer.2.attention.self.value.bias
layer 0.4857 0.9714 encoder.layer.2.attention.output.dense.weight encoder.layer.2.attention.output.dense.bias encoder.layer.2.attention.output.LayerNorm.weight encoder.layer.2.attention.output.LayerNorm.bias
layer 1.9327 3.8655 encoder.layer.2.intermediate.dense.weight encoder.layer.2.intermediate.dense.bias
layer 1.9353 3.8705 encoder.layer.2.output.dense.weight encoder.layer.2.output.dense.bias encoder.layer.2.output.LayerNorm.weight encoder.layer.2.output.LayerNorm.bias
layer 1.6106 3.2212 encoder.layer.3.attention.self.query.weight encoder.layer.3.attention.self.query.bias encoder.layer.3.attention.self.key.weight encoder.layer.3.attention.self.key.bias encoder.layer.3.attention.self.value.weight encoder.layer.3.attention.self.value.bias
layer 0.4857 0.9714 encoder.layer.3.attention.output.dense.weight encoder.layer.3.attention.output.dense.bias encoder.layer.3.attention.output.LayerNorm.weight encoder.layer.3.attention.output.LayerNorm.bias
layer 1.9327 3.8655 encoder.layer.3.intermediate.dense.weight encoder.layer.3.intermediate.dense.bias
layer 1.9353 3.8705 encoder.layer.3.output.dense.weight encoder.layer.3.output.dense.bias encoder.layer.3.output.LayerNorm.weight encoder.layer.3.output.LayerNorm.bias
layer 1.6106 3.2212 encoder.layer.4.attention.self.query.weight encoder.layer.4.attention.self.query.bias encoder.layer.4.attention.self.key.weight encoder.layer.4.attention.self.key.bias encoder.layer.4.attention.self.value.weight encoder.layer.4.attention.self.value.bias
layer 0.4857 0.9714 encoder.layer.4.attention.output.dense.weight encoder.layer.4.attention.output.dense.bias encoder.layer.4.attention.output.LayerNorm.weight encoder.layer.4.attention.output.LayerNorm.bias
layer 1.9327 3.8655 encoder.layer.4.intermediate.dense.weight encoder.layer.4.intermediate.dense.bias
layer 1.9353 3.8705 encoder.layer.4.output.dense.weight encoder.layer.4.output.dense.bias encoder.layer.4.output.LayerNorm.weight encoder.layer.4.output.LayerNorm.bias
layer 1.6106 3.2212 encoder.layer.5.attention.self.query.weight encoder.layer.5.attention.self.query.bias encoder.layer.5.attention.self.key.weight encoder.layer.5.attention.self.key.bias encoder.layer.5.attention.self.value.weight encoder.layer.5.attention.self.value.bias
layer 0.4857 0.9714 encoder.layer.5.attention.output.dense.weight encoder.layer.5.attention.output.dense.bias encoder.layer.5.attention.output.LayerNorm.weight encoder.layer.5.attention.output.LayerNorm.bias
layer 1.9327 3.8655 encoder.layer.5.intermediate.dense.weight encoder.layer.5.intermediate.dense.bias
layer 1.9353 3.8705 encoder.layer.5.output.dense.weight encoder.layer.5.output.dense.bias encoder.layer.5.output.LayerNorm.weight encoder.layer.5.output.LayerNorm.bias
layer 1.6106 3.2212 encoder.layer.6.attention.self.query.weight encoder.layer.6.attention.self.query.bias encoder.layer.6.attention.self.key.weight encoder.layer.6.attention.self.key.bias encoder.layer.6.attention.self.value.weight encoder.layer.6.attention.self.value.bias
layer 0.4857 0.9714 encoder.layer.6.attention.output.dense.weight encoder.layer.6.attention.output.dense.bias encoder.layer.6.attention.output.LayerNorm.weight encoder.layer.6.attention.output.LayerNorm.bias
layer 1.9327 3.8655 encoder.layer.6.intermediate.dense.weight encoder.layer.6.intermediate.dense.bias
layer 1.9353 3.8705 encoder.layer.6.output.dense.weight encoder.layer.6.output.dense.bias encoder.layer.6.output.LayerNorm.weight encoder.layer.6.output.LayerNorm.bias
layer 1.6106 3.2212 encoder.layer.7.attention.self.query.weight encoder.layer.7.attention.self.query.bias encoder.layer.7.attention.self.key.weight encoder.layer.7.attention.self.key.bias encoder.layer.7.attention.self.value.weight encoder.layer.7.attention.self.value.bias
layer 0.4857 0.9714 encoder.layer.7.attention.output.dense.weight encoder.layer.7.attention.output.dense.bias encoder.layer.7.attention.output.LayerNorm.weight encoder.layer.7.attention.output.LayerNorm.bias
layer 1.9327 3.8655 encoder.layer.7.intermediate.dense.weight encoder.layer.7.intermediate.dense.bias
layer 1.9353 3.8705 encoder.layer.7.output.dense.weight encoder.layer.7.output.dense.bias encoder.layer.7.output.LayerNorm.weight encoder.layer.7.output.LayerNorm.bias
layer 1.6106 3.2212 encoder.layer.8.attention.self.query.weight encoder.layer.8.attention.self.query.bias encoder.layer.8.attention.self.key.weight encoder.layer.8.attention.self.key.bias encoder.layer.8.attention.self.value.weight encoder.layer.8.attention.self.value.bias
layer 0.4857 0.9714 encoder.layer.8.attention.output.dense.weight encoder.layer.8.attention.output.dense.bias encoder.layer.8.attention.output.LayerNorm.weight encoder.layer.8.attention.output.LayerNorm.bias
layer 1.9327 3.8655 encoder.layer.8.intermediate.dense.weight encoder.layer.8.intermediate.dense.bias
layer 1.9353 3.8705 encoder.layer.8.output.dense.weight encoder.layer.8.output.dense.bias encoder.layer.8.output.LayerNorm.weight encoder.layer.8.output.LayerNorm.bias
layer 1.6106 3.2212 encoder.layer.9.attention.self.query.weight encoder.layer.9.attention.self.query.bias encoder.layer.9.attention.self.key.weight encoder.layer.9.attention.self.key.bias encoder.layer.9.attention.self.value.weight encoder.layer.9.attention.self.value.bias
layer 0.4857 0.9714 encoder.layer.9.attention.output.dense.weight encoder.layer.9.attention.output.dense.bias encoder.layer.9.attention.output.LayerNorm.weight encoder.layer.9.attention.output.LayerNorm.bias
layer 1.9327 3.8655 encoder.layer.9.intermediate.dense.weight encoder.layer.9.intermediate.dense.bias
layer 1.9353 3.8705 encoder.layer.9.output.dense.weight encoder.layer.9.output.dense.bias encoder.layer.9.output.LayerNorm.weight encoder.layer.9.output.LayerNorm.bias
layer 1.6106 3.2212 encoder.layer.10.attention.self.query.weight encoder.layer.10.attention.self.query.bias encoder.layer.10.attention.self.key.weight encoder.layer.10.attention.self.key.bias encoder.layer.10.attention.self.value.weight encoder.layer.10.attention.self.value.bias
layer 0.4857 0.9714 encoder.layer.10.attention.output.dense.weight encoder.layer.10.attention.output.dense.bias encoder.layer.10.attention.output.LayerNorm.weight encoder.layer.10.attention.output.LayerNorm.bias
layer 1.9327 3.8655 encoder.layer.10.intermediate.dense.weight encoder.layer.10.intermediate.dense.bias
layer 1.9353 3.8705 encoder.layer.10.output.dense.weight encoder.layer.10.output.dense.bias encoder.layer.10.output.LayerNorm.weight encoder.layer.10.output.LayerNorm.bias
layer 1.6106 3.2212 encoder.layer.11.attention.self.query.weight encoder.layer.11.attention.self.query.bias encoder.layer.11.attention.self.key.weight encoder.layer.11.attention.self.key.bias encoder.layer.11.attention.self.value.weight encoder.layer.11.attention.self.value.bias
layer 0.4857 0.9714 encoder.layer.11.attention.output.dense.weight encoder.layer.11.attention.output.dense.bias encoder.layer.11.attention.output.LayerNorm.weight encoder.layer.11.attention.output.LayerNorm.bias
layer 1.9327 3.8655 encoder.layer.11.intermediate.dense.weight encoder.layer.11.intermediate.dense.bias
layer 1.9353 3.8705 encoder.layer.11.output.dense.weight encoder.layer.11.output.dense.bias encoder.layer.11.output.LayerNorm.weight encoder.layer.11.output.LayerNorm.bias
layer 0.0038 0.0075 pooler.dense.weight pooler.dense.bias
