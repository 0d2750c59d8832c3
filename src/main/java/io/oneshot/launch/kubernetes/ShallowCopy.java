package io.oneshot.launch.kubernetes;

import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;

/**
 * A new object of the same Kubernetes model class holding every field of the original, the values
 * themselves shared (nested objects, lists and maps are not copied). Every field, found by
 * reflection once per class: a field a newer model adds is copied too, never silently dropped, as a
 * hand-written copy would.
 *
 * <p>{@link JobFactory} copies only the objects on the path to what an attempt changes, and sets
 * those changes on the copies: everything else of a Job stays shared with its route's prepared
 * template, which nobody changes.
 */
final class ShallowCopy {
  private record Shape(Constructor<?> make, Field[] fields) {}

  private static final ClassValue<Shape> SHAPES =
      new ClassValue<>() {
        @Override
        protected Shape computeValue(Class<?> type) {
          List<Field> fields = new ArrayList<>();
          for (Class<?> c = type; c != Object.class; c = c.getSuperclass()) {
            for (Field f : c.getDeclaredFields()) {
              if (!Modifier.isStatic(f.getModifiers())) {
                f.setAccessible(true);
                fields.add(f);
              }
            }
          }
          try {
            Constructor<?> make = type.getDeclaredConstructor();
            make.setAccessible(true);
            return new Shape(make, fields.toArray(Field[]::new));
          } catch (NoSuchMethodException e) {
            throw new IllegalArgumentException(type.getName() + " has no constructor without", e);
          }
        }
      };

  private ShallowCopy() {}

  @SuppressWarnings("unchecked")
  static <T> T of(T original) {
    Shape shape = SHAPES.get(original.getClass());
    try {
      Object copy = shape.make().newInstance();
      for (Field f : shape.fields()) {
        f.set(copy, f.get(original));
      }
      return (T) copy;
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("cannot copy a " + original.getClass().getName(), e);
    }
  }
}
