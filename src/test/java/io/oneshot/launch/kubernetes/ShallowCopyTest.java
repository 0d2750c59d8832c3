package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;

import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.ObjectMeta;
import io.fabric8.kubernetes.api.model.PodSpec;
import io.fabric8.kubernetes.api.model.PodTemplateSpec;
import io.fabric8.kubernetes.api.model.batch.v1.Job;
import io.fabric8.kubernetes.api.model.batch.v1.JobSpec;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import org.junit.jupiter.api.Test;

class ShallowCopyTest {

  /**
   * Every field of each model class the factory copies, set to a value of its own (so a field left
   * out shows as a difference), is in the copy: the same value, not a copy of it.
   */
  @Test
  void aCopyHoldsEveryFieldOfTheOriginalAndIsAnotherObject() throws Exception {
    for (Class<?> type :
        List.of(
            Job.class,
            ObjectMeta.class,
            JobSpec.class,
            PodTemplateSpec.class,
            PodSpec.class,
            Container.class)) {
      Object original = type.getDeclaredConstructor().newInstance();
      List<Field> fields = fields(type);
      for (Field f : fields) {
        f.set(original, valueFor(f));
      }
      Object copy = ShallowCopy.of(original);

      assertThat(copy).as(type.getSimpleName()).isNotSameAs(original).isEqualTo(original);
      for (Field f : fields) {
        assertThat(f.get(copy))
            .as(type.getSimpleName() + "." + f.getName())
            .isSameAs(f.get(original));
      }
    }
  }

  private static List<Field> fields(Class<?> type) {
    List<Field> out = new ArrayList<>();
    for (Class<?> c = type; c != Object.class; c = c.getSuperclass()) {
      for (Field f : c.getDeclaredFields()) {
        if (!Modifier.isStatic(f.getModifiers())) {
          f.setAccessible(true);
          out.add(f);
        }
      }
    }
    assertThat(out).as(type.getSimpleName()).hasSizeGreaterThan(2);
    return out;
  }

  private static Object valueFor(Field f) throws Exception {
    Class<?> t = f.getType();
    if (t == String.class) {
      return "value of " + f.getName();
    } else if (t == Integer.class || t == int.class) {
      return f.getName().length();
    } else if (t == Long.class || t == long.class) {
      return (long) f.getName().length();
    } else if (t == Boolean.class || t == boolean.class) {
      return Boolean.TRUE;
    } else if (List.class.isAssignableFrom(t)) {
      return new ArrayList<>(List.of());
    } else if (java.util.Map.class.isAssignableFrom(t)) {
      LinkedHashMap<String, Object> m = new LinkedHashMap<>();
      m.put(f.getName(), "v");
      return m;
    }
    return t.getDeclaredConstructor().newInstance();
  }
}
