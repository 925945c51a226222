tamp-profile 1
# resnet50 compute profile, written by models/make_layouts.py (do not edit; rerun it).
# Source: He et al. 2016 (CVPR), Table 1, 50-layer; torchvision names.
# 161 tensors, 25,557,032 parameters.
# ESTIMATE, NOT A MEASUREMENT: forward ms = the layer's forward FLOPs at batch 32 images of 224x224
# / an assumed sustained 10 TFLOP/s; backward = 2 x forward. One step: 79.4 ms.
# Change `scale` to rescale every time (e.g. 0.5 for a GPU twice that rate).
scale 1
# layer FORWARD_MS BACKWARD_MS TENSORS...
layer 0.7758 1.5517 conv1.weight bn1.weight bn1.bias
layer 0.0873 0.1747 layer1.0.conv1.weight layer1.0.bn1.weight layer1.0.bn1.bias
layer 0.7450 1.4900 layer1.0.conv2.weight layer1.0.bn2.weight layer1.0.bn2.bias
layer 0.3494 0.6988 layer1.0.conv3.weight layer1.0.bn3.weight layer1.0.bn3.bias
layer 0.3494 0.6988 layer1.0.downsample.0.weight layer1.0.downsample.1.weight layer1.0.downsample.1.bias
layer 0.3340 0.6679 layer1.1.conv1.weight layer1.1.bn1.weight layer1.1.bn1.bias
layer 0.7450 1.4900 layer1.1.conv2.weight layer1.1.bn2.weight layer1.1.bn2.bias
layer 0.3494 0.6988 layer1.1.conv3.weight layer1.1.bn3.weight layer1.1.bn3.bias
layer 0.3340 0.6679 layer1.2.conv1.weight layer1.2.bn1.weight layer1.2.bn1.bias
layer 0.7450 1.4900 layer1.2.conv2.weight layer1.2.bn2.weight layer1.2.bn2.bias
layer 0.3494 0.6988 layer1.2.conv3.weight layer1.2.bn3.weight layer1.2.bn3.bias
layer 0.6679 1.3359 layer2.0.conv1.weight layer2.0.bn1.weight layer2.0.bn1.bias
layer 0.7424 1.4849 layer2.0.conv2.weight layer2.0.bn2.weight layer2.0.bn2.bias
layer 0.3391 0.6782 layer2.0.conv3.weight layer2.0.bn3.weight layer2.0.bn3.bias
layer 0.6679 1.3359 layer2.0.downsample.0.weight layer2.0.downsample.1.weight layer2.0.downsample.1.bias
layer 0.3314 0.6628 layer2.1.conv1.weight layer2.1.bn1.weight layer2.1.bn1.bias
layer 0.7424 1.4849 layer2.1.conv2.weight layer2.1.bn2.weight layer2.1.bn2.bias
layer 0.3391 0.6782 layer2.1.conv3.weight layer2.1.bn3.weight layer2.1.bn3.bias
layer 0.3314 0.6628 layer2.2.conv1.weight layer2.2.bn1.weight layer2.2.bn1.bias
layer 0.7424 1.4849 layer2.2.conv2.weight layer2.2.bn2.weight layer2.2.bn2.bias
layer 0.3391 0.6782 layer2.2.conv3.weight layer2.2.bn3.weight layer2.2.bn3.bias
layer 0.3314 0.6628 layer2.3.conv1.weight layer2.3.bn1.weight layer2.3.bn1.bias
layer 0.7424 1.4849 layer2.3.conv2.weight layer2.3.bn2.weight layer2.3.bn2.bias
layer 0.3391 0.6782 layer2.3.conv3.weight layer2.3.bn3.weight layer2.3.bn3.bias
layer 0.6628 1.3256 layer3.0.conv1.weight layer3.0.bn1.weight layer3.0.bn1.bias
layer 0.7412 1.4823 layer3.0.conv2.weight layer3.0.bn2.weight layer3.0.bn2.bias
layer 0.3340 0.6679 layer3.0.conv3.weight layer3.0.bn3.weight layer3.0.bn3.bias
layer 0.6628 1.3256 layer3.0.downsample.0.weight layer3.0.downsample.1.weight layer3.0.downsample.1.bias
layer 0.3301 0.6602 layer3.1.conv1.weight layer3.1.bn1.weight layer3.1.bn1.bias
layer 0.7412 1.4823 layer3.1.conv2.weight layer3.1.bn2.weight layer3.1.bn2.bias
layer 0.3340 0.6679 layer3.1.conv3.weight layer3.1.bn3.weight layer3.1.bn3.bias
layer 0.3301 0.6602 layer3.2.conv1.weight layer3.2.bn1.weight layer3.2.bn1.bias
layer 0.7412 1.4823 layer3.2.conv2.weight layer3.2.bn2.weight layer3.2.bn2.bias
layer 0.3340 0.6679 layer3.2.conv3.weight layer3.2.bn3.weight layer3.2.bn3.bias
layer 0.3301 0.6602 layer3.3.conv1.weight layer3.3.bn1.weight layer3.3.bn1.bias
layer 0.7412 1.4823 layer3.3.conv2.weight layer3.3.bn2.weight layer3.3.bn2.bias
layer 0.3340 0.6679 layer3.3.conv3.weight layer3.3.bn3.weight layer3.3.bn3.bias
layer 0.3301 0.6602 layer3.4.conv1.weight layer3.4.bn1.weight layer3.4.bn1.bias
layer 0.7412 1.4823 layer3.4.conv2.weight layer3.4.bn2.weight layer3.4.bn2.bias
layer 0.3340 0.6679 layer3.4.conv3.weight layer3.4.bn3.weight layer3.4.bn3.bias
layer 0.3301 0.6602 layer3.5.conv1.weight layer3.5.bn1.weight layer3.5.bn1.bias
layer 0.7412 1.4823 layer3.5.conv2.weight layer3.5.bn2.weight layer3.5.bn2.bias
layer 0.3340 0.6679 layer3.5.conv3.weight layer3.5.bn3.weight layer3.5.bn3.bias
layer 0.6602 1.3205 layer4.0.conv1.weight layer4.0.bn1.weight layer4.0.bn1.bias
layer 0.7405 1.4810 layer4.0.conv2.weight layer4.0.bn2.weight layer4.0.bn2.bias
layer 0.3314 0.6628 layer4.0.conv3.weight layer4.0.bn3.weight layer4.0.bn3.bias
layer 0.6602 1.3205 layer4.0.downsample.0.weight layer4.0.downsample.1.weight layer4.0.downsample.1.bias
layer 0.3295 0.6590 layer4.1.conv1.weight layer4.1.bn1.weight layer4.1.bn1.bias
layer 0.7405 1.4810 layer4.1.conv2.weight layer4.1.bn2.weight layer4.1.bn2.bias
layer 0.3314 0.6628 layer4.1.conv3.weight layer4.1.bn3.weight layer4.1.bn3.bias
layer 0.3295 0.6590 layer4.2.conv1.weight layer4.2.bn1.weight layer4.2.bn1.bias
layer 0.7405 1.4810 layer4.2.conv2.weight layer4.2.bn2.weight layer4.2.bn2.bias
layer 0.3314 0.6628 layer4.2.conv3.weight layer4.2.bn3.weight layer4.2.bn3.bias
layer 0.0131 0.0262 fc.weight fc.bias
