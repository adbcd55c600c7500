package conformance

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilnrt/kiln/internal/testdata"
)

// modelsManifest is the list of the real-model set in the repository; fetch.sh copies
// it into the set when the set is complete.
const modelsManifest = "../../../../bench/models/models.tsv"

// realModelCases returns the cases of the real-model set, after checking that the set
// was fetched from the repository's current list.
func realModelCases(t *testing.T) []string {
	t.Helper()
	dir := testdata.Models(t)
	want, err := os.ReadFile(modelsManifest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "models.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s was fetched from another list than bench/models/models.tsv: run bench/models/fetch.sh again", dir)
	}
	rows := 0
	for _, line := range strings.Split(string(want), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			rows++
		}
	}
	cases, err := FindCases([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != rows {
		t.Fatalf("found %d cases in %s, bench/models/models.tsv lists %d", len(cases), dir, rows)
	}
	return cases
}

// TestRealModels: every model of the real-model set (ONNX files that npm packages ship:
// voice-activity detectors with LSTMs in nested Ifs on values of unknown rank, OCR
// networks, a wake-word head; torchvision networks exported with PyTorch:
// EfficientNet-B0, MobileNetV3, ResNet-50, RegNet, ConvNeXt-tiny, ViT-B/16, two
// segmentation networks (LR-ASPP, DeepLabV3 with dilated convolutions), SSDLite and
// Faster R-CNN, detectors whose post-processing (91 classes of thresholds, top-k and
// NonMaxSuppression; RoiAlign per pyramid level) has data-dependent extents
// throughout; a
// MobileNetV2 quantized as ONNX Runtime's dynamic quantizer does it; a keyword spotter
// with an STFT and mel-filterbank front end) answers on the reference evaluator as on
// ONNX Runtime.
func TestRealModels(t *testing.T) {
	o := opts()
	o.Timeout = 5 * time.Minute // ViT-B/16 is 17 GFLOPs for the plain Go evaluator
	runAllPass(t, realModelCases(t), o)
}

// realModelsCompiled are the cases of the real-model set that the compiled engine
// answers; the others are refused at compile time (an op without a kernel, dims that
// depend on data), which TestRealModelsCompiled logs.
var realModelsCompiled = map[string]bool{
	"oww_hello_deepa":                 true,
	"ppocr_mobile_v2_cls":             true,
	"ppocr_v4_det":                    true,
	"ppocr_v4_rec":                    true,
	"silero_vad_16k_op15":             true,
	"silero_vad_half":                 true,
	"silero_vad_legacy":               true,
	"silero_vad_op18_ifless":          true,
	"silero_vad_v5":                   true,
	"silero_vad_v6":                   true,
	"tv_efficientnet_b0":              true,
	"tv_mobilenet_v3_large":           true,
	"tv_resnet50":                     true,
	"tv_regnet_y_400mf":               true,
	"tv_convnext_tiny":                true,
	"tv_vit_b_16":                     true,
	"tv_densenet121":                  true,
	"tv_googlenet":                    true,
	"tv_regnet_x_400mf":               true,
	"tv_shufflenet_v2_x1_0":           true,
	"tv_mnasnet1_0":                   true,
	"tvs_lraspp_mobilenet_v3":         true,
	"tvs_deeplabv3_mobilenet_v3":      true,
	"tvd_ssdlite320_mobilenet_v3":     true,
	"tvd_fasterrcnn_mobilenet_v3_320": true,
	"tvv_mc3_18":                      true,
	"tvq_mobilenet_v2":                true,
	"tvh_mobilenet_v3_large":          true,
	"kws_melspec_cnn_gru":             true,
}

// TestRealModelsCompiled: the real models the compiled engine builds match ONNX
// Runtime, and the others are refused at compile time with a reason, not answered
// wrongly.
func TestRealModelsCompiled(t *testing.T) { checkRealModelsCompiled(t, 3) }

// TestRealModelsCompiledAtO0: the same without the graph optimizer's rewrites and
// fusion, so a model's answer does not depend on them.
func TestRealModelsCompiledAtO0(t *testing.T) { checkRealModelsCompiled(t, 0) }

func checkRealModelsCompiled(t *testing.T, level int) {
	cases := realModelCases(t)
	o := compiledOptsAt(t, level)
	for _, c := range cases {
		name := filepath.Base(c)
		r := RunCase(c, o)
		switch {
		case r.Status == Pass:
			t.Logf("%s: pass in %.2fs, max err %.2g", name, r.Seconds, r.MaxErr)
		case realModelsCompiled[name]:
			t.Errorf("%s: %s: %s", name, r.Status, r.Reason)
		case strings.Contains(r.Reason, "compile failed"):
			t.Logf("%s: refused: %s", name, r.Reason)
		default:
			t.Errorf("%s: %s, not a compile-time refusal: %s", name, r.Status, r.Reason)
		}
	}
}
