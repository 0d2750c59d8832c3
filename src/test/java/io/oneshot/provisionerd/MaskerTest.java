package io.oneshot.provisionerd;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

class MaskerTest {
  @Test
  void everyOccurrenceIsMaskedTheLongestValueFirst() {
    Masker m = new Masker(List.of("abc", "abcdef"));
    assertThat(m.mask("x abcdef y abc z abcabc")).isEqualTo("x *** y *** z ******");
    assertThat(m.mask("nothing here")).isEqualTo("nothing here");
    assertThat(m.mask(null)).isNull();
  }

  @Test
  void valuesTooShortToMaskSafelyAreLeftAndNewOnesTakeEffectAtOnce() {
    Masker m = new Masker(List.of("ab", ""));
    assertThat(m.mask("ab cd")).isEqualTo("ab cd");
    m.add("output-value");
    assertThat(m.mask("the output-value is")).isEqualTo("the *** is");
  }
}
